/* egress_stream.c - the egress allowlist on an engine that does not see this machine's files
 * (the volume path: Docker Desktop, a podman machine, tcp:// with TLS; docs/design/egress.md,
 * "Container backend on a remote engine"). The container keeps NetworkMode none. The run's
 * proxy stays in the server, listening on a unix socket in a private folder of the server's
 * machine. Once the container runs, the server starts one `exec` in it (Engine API
 * POST /containers/{id}/exec, then POST /exec/{id}/start hijacked: the connection becomes the
 * exec's stdin and its multiplexed stdout), as another uid than the code, running a bridge (a
 * few lines of the image's python3 -I, or of its node when it has no python3) that listens on
 * 127.0.0.1:EGRESS_PORT in the container's own network namespace and carries every connection as
 * frames over that one stream. The server's end (a thread per run) opens one connection to the
 * proxy's socket per connection the bridge announces and copies bytes both ways.
 *
 * The bridge decides nothing: whatever frames arrive, the server only ever connects to the
 * run's proxy, which applies the allowlist, ports, pins and the private-address rule as on
 * every engine. A bridge killed or replaced by the code gains nothing. Frames (both ways):
 * type (1 byte), connection id (u32 big-endian), length (u32 big-endian), payload:
 *   'O' a new connection (bridge -> server), 'D' bytes, 'E' no more bytes this way,
 *   'X' the connection is gone (reset).
 * Fail closed: the proxy's socket refusing ends the stream; the bridge then stops listening
 * and exits, so every later connection to 127.0.0.1:EGRESS_PORT is refused.
 * The exec's stdout arrives in the Engine API's stream format (8-byte headers: stream, 0, 0, 0,
 * u32 big-endian length; https://docs.docker.com/engine/api/v1.41/#operation/ContainerAttach);
 * egress_frames.c parses both layers (no I/O there: tests/fuzz/fuzz_egress_stream.c runs it). */
#include "engine/engine.h"
#include "engine/egress_frames.h"
#include "engine/hijack.h"
#include "engine/state.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "run/run.h"

#define BRIDGE_CONNS 64 /* connections at once (the proxy takes 32 at a time) */
#define BRIDGE_SEND_TIMEOUT_MS 10000
#define BRIDGE_HEAD_TIMEOUT_MS 10000 /* the engine must start the bridge's exec within this */

/* The bridge in Python: run as `python3 -Ic SRC` by the exec (isolated: no working folder,
 * user site or PYTHON* variable can put another module in its way). %u: the port. One thread
 * accepts, one per connection reads; the main thread reads frames from stdin. stdin's end (the
 * server ended the stream: the run ends, or the proxy is gone) stops the listener, resets every
 * connection (SO_LINGER 0) and exits: fail closed. A connection idle for 60 s either way (the
 * proxy's own idle bound, EGRESS_IDLE_TIMEOUT_MS) is reset, so a client that stops reading
 * holds the bridge's other connections for at most that long. */
static const char bridge_py[] =
    "import os,socket as S,struct,threading as T\n"
    "L=T.Lock();C={};H={}\n"
    "def w(t,k,d=b''):\n"
    " b=struct.pack('>cII',t,k,len(d))+d\n"
    " with L:\n"
    "  while b:b=b[os.write(1,b):]\n"
    "def rst(k):\n"
    " c=C.pop(k,None)\n"
    " if c:\n"
    "  try:c.setsockopt(S.SOL_SOCKET,S.SO_LINGER,struct.pack('ii',1,0));c.close()\n"
    "  except OSError:pass\n"
    "def half(k):\n"
    " with L:H[k]=H.get(k,0)+1;n=H[k]\n"
    " if n==2:\n"
    "  c=C.pop(k,None)\n"
    "  if c:c.close()\n"
    "def rd(k,c):\n"
    " try:\n"
    "  while 1:\n"
    "   d=c.recv(65536)\n"
    "   if not d:break\n"
    "   w(b'D',k,d)\n"
    "  w(b'E',k);half(k)\n"
    " except OSError:w(b'X',k)\n"
    "def acc():\n"
    " k=0\n"
    " while 1:\n"
    "  c=l.accept()[0];c.settimeout(60);k+=1;C[k]=c;w(b'O',k)\n"
    "  T.Thread(target=rd,args=(k,c),daemon=1).start()\n"
    "def rx(n):\n"
    " b=b''\n"
    " while len(b)<n:\n"
    "  d=os.read(0,n-len(b))\n"
    "  if not d:raise EOFError\n"
    "  b+=d\n"
    " return b\n"
    "l=S.socket();l.setsockopt(S.SOL_SOCKET,S.SO_REUSEADDR,1)\n"
    "l.bind(('127.0.0.1',%u));l.listen(128)\n"
    "T.Thread(target=acc,daemon=1).start()\n"
    "try:\n"
    " while 1:\n"
    "  t,k,n=struct.unpack('>cII',rx(9));d=rx(n) if n else b'';c=C.get(k)\n"
    "  if c is None:continue\n"
    "  try:\n"
    "   if t==b'D':c.sendall(d)\n"
    "   elif t==b'E':c.shutdown(S.SHUT_WR);half(k)\n"
    "   else:rst(k)\n"
    "  except OSError:rst(k);w(b'X',k)\n"
    "except (EOFError,OSError):pass\n"
    "l.shutdown(S.SHUT_RDWR)\n"
    "for k in list(C):rst(k)\n"
    "os._exit(3)\n";

/* The bridge in Node, for an image without python3 (`node -e SRC`; the exec's NODE_OPTIONS is
 * emptied, 'node:net' is the built-in module whatever NODE_PATH holds): the same frames and the
 * same ends as the Python one. %u: the port. A connection that cannot take a 'D' at once pauses
 * stdin until it drains or closes (as the Python sendall holds the reader); stdout to a pipe is
 * synchronous on Linux (https://nodejs.org/api/process.html#a-note-on-process-io). */
static const char bridge_js[] =
    "const n=require('node:net'),C=new Map(),H=new Map(),I=process.stdin,O=process.stdout;let k=0;"
    "function w(t,i,d){const h=Buffer.alloc(9);h[0]=t.charCodeAt(0);h.writeUInt32BE(i,1);"
    "h.writeUInt32BE(d?d.length:0,5);return O.write(d?Buffer.concat([h,d]):h);}"
    "function x(i){const c=C.get(i);if(c){C.delete(i);c.resetAndDestroy();}}"
    "function half(i){const m=(H.get(i)||0)+1;H.set(i,m);if(m==2){H.delete(i);"
    "const c=C.get(i);C.delete(i);if(c)c.destroy();}}"
    "const l=n.createServer({allowHalfOpen:true},c=>{const i=++k;C.set(i,c);c.setTimeout(60000);"
    "w('O',i);c.on('data',d=>{if(!w('D',i,d)){c.pause();O.once('drain',()=>c.resume());}});"
    "c.on('end',()=>{w('E',i);half(i);});"
    "c.on('timeout',()=>{if(C.has(i)){x(i);w('X',i);}});"
    "c.on('error',()=>{if(C.has(i)){C.delete(i);w('X',i);}});"
    "c.on('close',()=>C.delete(i));});"
    "l.listen(%u,'127.0.0.1');let b=Buffer.alloc(0);"
    "function end(){l.close();for(const i of [...C.keys()])x(i);process.exit(3);}"
    "I.on('end',end);I.on('error',end);I.on('data',d=>{b=Buffer.concat([b,d]);"
    "while(b.length>=9){const m=b.readUInt32BE(5);if(b.length<9+m)break;"
    "const t=String.fromCharCode(b[0]),i=b.readUInt32BE(1),p=b.subarray(9,9+m);b=b.subarray(9+m);"
    "const c=C.get(i);if(!c)continue;"
    "if(t=='D'){if(!c.write(p)){I.pause();const r=()=>I.resume();c.once('drain',r);"
    "c.once('close',r);}}else if(t=='E'){c.end();half(i);}else x(i);}});";

/* Which bridge runs: python3 when the image has it (it starts faster), else node, chosen as
 * the local relay is (egress_relay_wait_script()). $1 the Python source, $2 the Node one. */
static const char bridge_sh[] = "if command -v python3 >/dev/null; then exec python3 -Ic \"$1\"; "
                                "else exec node -e \"$2\"; fi";

int engine_egress_bridge(const char *lang, uint16_t port, char *buf, size_t size)
{
        int n;

        if (strcmp(lang, "node") == 0)
                n = snprintf(buf, size, bridge_js, (unsigned)port);
        else if (strcmp(lang, "python3") == 0)
                n = snprintf(buf, size, bridge_py, (unsigned)port);
        else
                return -EINVAL;
        return n < 0 || (size_t)n >= size ? -ENOSPC : 0;
}

struct bridge_conn {
        uint32_t id;
        int fd; /* to the proxy's socket; -1 = free */
        bool read_eof;
};

struct engine_egress_stream {
        char dir[40], sock[64]; /* the proxy's private folder and socket */
        struct egress_session *proxy;
        CURL *h; /* the hijacked exec start */
        int sock_fd;
        int stop[2]; /* a byte: the pump ends */
        pthread_t pump;
        bool pumping;
        struct egress_frames fr; /* the stream's parser; fr.ended: the pump ends */
        struct bridge_conn conns[BRIDGE_CONNS];
};

/* Send all of @buf on the hijacked stream, waiting for room up to BRIDGE_SEND_TIMEOUT_MS. Return
 * 0 or -EIO. */
static int stream_send(struct engine_egress_stream *s, const void *buf, size_t n)
{
        return engine_hijack_send(s->h, s->sock_fd, buf, n, BRIDGE_SEND_TIMEOUT_MS);
}

static int frame_send(struct engine_egress_stream *s, char type, uint32_t id, const void *data,
                      uint32_t n)
{
        unsigned char h[9] = {
            (unsigned char)type, id >> 24, id >> 16, id >> 8, id, n >> 24, n >> 16, n >> 8, n};
        int r = stream_send(s, h, sizeof(h));
        return r < 0 || n == 0 ? r : stream_send(s, data, n);
}

static struct bridge_conn *conn_find(struct engine_egress_stream *s, uint32_t id)
{
        for (size_t i = 0; i < BRIDGE_CONNS; i++)
                if (s->conns[i].fd >= 0 && s->conns[i].id == id)
                        return &s->conns[i];
        return NULL;
}

static void conn_close(struct bridge_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

/* A connection to the proxy's socket for the bridge's connection @id. The proxy refusing (it
 * ended): false, the whole stream ends (fail closed). A full table: that connection is reset. */
static bool conn_open(struct engine_egress_stream *s, uint32_t id)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        struct timeval tv = {.tv_sec = BRIDGE_SEND_TIMEOUT_MS / 1000};
        struct bridge_conn *c = NULL;

        for (size_t i = 0; i < BRIDGE_CONNS && !c; i++)
                if (s->conns[i].fd < 0)
                        c = &s->conns[i];
        if (!c || conn_find(s, id)) {
                (void)frame_send(s, 'X', id, NULL, 0);
                return true;
        }
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", s->sock);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                log_debug("egress stream: the proxy's socket refused (%m): ending the stream");
                conn_close(c);
                return false;
        }
        /* a proxy that stops reading cannot hold the pump (and every other connection) */
        (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        c->id = id;
        c->read_eof = false;
        return true;
}

/* One frame from the bridge (egress_frame_fn: @ctx is the stream). False: the stream ends. */
static bool frame_do(void *ctx, char type, uint32_t id, const unsigned char *data, uint32_t n)
{
        struct engine_egress_stream *s = ctx;
        struct bridge_conn *c;

        if (type == 'O')
                return conn_open(s, id);
        c = conn_find(s, id);
        if (!c)
                return true;
        if (type == 'D') {
                for (uint32_t off = 0; off < n;) {
                        ssize_t w = send(c->fd, data + off, n - off, MSG_NOSIGNAL);
                        if (w <= 0) {
                                conn_close(c);
                                (void)frame_send(s, 'X', id, NULL, 0);
                                return true;
                        }
                        off += (uint32_t)w;
                }
        } else if (type == 'E') {
                (void)shutdown(c->fd, SHUT_WR);
        } else {
                conn_close(c);
        }
        return true;
}

/* Everything readable on the hijacked stream now; its end ends the pump. */
static void stream_read(struct engine_egress_stream *s)
{
        unsigned char buf[65536];

        for (;;) {
                size_t got = 0;
                CURLcode rc = curl_easy_recv(s->h, buf, sizeof(buf), &got);
                if (rc == CURLE_AGAIN)
                        return;
                if (rc != CURLE_OK || got == 0) {
                        s->fr.ended = true;
                        return;
                }
                egress_frames_feed(&s->fr, buf, got, frame_do, s);
                if (s->fr.ended)
                        return;
        }
}

/* Bytes from the proxy on connection @c, as one 'D' frame (or 'E' at its end, 'X' on error). */
static void conn_read(struct engine_egress_stream *s, struct bridge_conn *c)
{
        unsigned char buf[32768];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0) {
                if (frame_send(s, 'D', c->id, buf, (uint32_t)n) < 0)
                        s->fr.ended = true;
                return;
        }
        c->read_eof = true;
        if (frame_send(s, n == 0 ? 'E' : 'X', c->id, NULL, 0) < 0)
                s->fr.ended = true;
        if (n < 0)
                conn_close(c);
}

static void *pump_main(void *arg)
{
        struct engine_egress_stream *s = arg;
        struct pollfd pfd[2 + BRIDGE_CONNS];
        struct bridge_conn *who[2 + BRIDGE_CONNS];

        stream_read(s); /* bytes that came with the answer's head */
        while (!s->fr.ended) {
                nfds_t n = 0;
                pfd[n++] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = s->sock_fd, .events = POLLIN};
                for (size_t i = 0; i < BRIDGE_CONNS; i++)
                        if (s->conns[i].fd >= 0 && !s->conns[i].read_eof) {
                                who[n] = &s->conns[i];
                                pfd[n++] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
                        }
                if (poll(pfd, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[0].revents)
                        break;
                if (pfd[1].revents)
                        stream_read(s);
                for (nfds_t i = 2; i < n && !s->fr.ended; i++)
                        if (pfd[i].revents && who[i]->fd >= 0)
                                conn_read(s, who[i]);
        }
        for (size_t i = 0; i < BRIDGE_CONNS; i++)
                conn_close(&s->conns[i]);
        /* the stream's end is the bridge's stdin's end: it stops listening and exits */
        curl_easy_cleanup(s->h);
        s->h = NULL;
        return NULL;
}

/* Create the exec that runs the bridge, as @uid (not the code's), and start it on a hijacked
 * connection (s->h, s->sock_fd); the stream's first bytes go to the frame parser. */
static int bridge_start(struct engine_egress_stream *s, const struct engine_conn *c, const char *id,
                        uid_t uid, struct sbx_error *err)
{
        char py[sizeof(bridge_py) + 16], js[sizeof(bridge_js) + 16], eid[72];
        char rest[ENGINE_HIJACK_REST];
        size_t n = 0;
        int r;

        (void)engine_egress_bridge("python3", EGRESS_PORT, py, sizeof(py));
        (void)engine_egress_bridge("node", EGRESS_PORT, js, sizeof(js));
        const char *const argv[] = {"sh", "-c", bridge_sh, "vestibule-bridge", py, js, NULL};
        /* NODE_OPTIONS could --require a module into the node bridge */
        const char *const env[] = {"NODE_OPTIONS=", NULL};
        r = engine_exec_create(
            c, id,
            &(struct engine_exec){
                .uid = uid, .argv = argv, .env = env, .what = "the egress bridge's exec"},
            eid, err);
        if (r == 0)
                r = engine_exec_hijack(c, eid, "start the egress bridge's exec",
                                       BRIDGE_HEAD_TIMEOUT_MS, &s->h, &s->sock_fd, rest, &n, err);
        if (r < 0)
                return sbx_wrap(err, "egress (nothing was run)");
        egress_frames_feed(&s->fr, (unsigned char *)rest, n, frame_do, s);
        return 0;
}

int engine_egress_stream_proxy(const struct sbx_config *cfg, struct engine_egress_stream **ret,
                               struct egress_session **ret_proxy, struct sbx_error *err)
{
        struct engine_egress_stream *s = xcalloc(1, sizeof(*s));
        int fd = -1, r;

        s->sock_fd = -1;
        s->stop[0] = s->stop[1] = -1;
        for (size_t i = 0; i < BRIDGE_CONNS; i++)
                s->conns[i].fd = -1;
        snprintf(s->dir, sizeof(s->dir), "/tmp/vestibule-egress-XXXXXX");
        if (!mkdtemp(s->dir)) { /* 0700: no other local user reaches the proxy's socket */
                r = sbx_fail(err, errno,
                             "egress: a private folder for the proxy's socket in /tmp: "
                             "%m; nothing was run");
                free(s);
                return r;
        }
        snprintf(s->sock, sizeof(s->sock), "%s/proxy.sock", s->dir);
        r = egress_listen_unix(s->sock, &fd, err);
        if (r == 0)
                r = egress_session_start(cfg, fd, ret_proxy, err); /* takes fd */
        if (r == 0 && pipe2(s->stop, O_CLOEXEC) < 0)
                r = sbx_fail(err, errno, "egress: pipe: %m");
        if (r < 0) {
                if (*ret_proxy) {
                        struct run_result dropped = {0};
                        egress_session_finish(TAKE_PTR(*ret_proxy), &dropped.egress);
                        run_result_done(&dropped);
                }
                engine_egress_stream_end(s);
                return sbx_wrap(err, "egress: the proxy did not start; nothing was run");
        }
        *ret = s;
        return 0;
}

int engine_egress_stream_attach(struct engine_egress_stream *s, const struct engine_conn *c,
                                const char *id, uid_t code_uid, struct sbx_error *err)
{
        int r;

        /* the bridge as another uid than the code: the code can neither signal nor trace it,
         * nor open its stdin and stdout through /proc (it gains nothing if it could) */
        r = bridge_start(s, c, id, code_uid == 65534 ? 65533 : 65534, err);
        if (r == 0 && s->fr.ended)
                r = sbx_fail(err, EPROTO, "egress: the bridge's stream ended at once");
        if (r == 0) {
                r = -pthread_create(&s->pump, NULL, pump_main, s);
                if (r < 0)
                        sbx_fail(err, -r, "egress: the bridge's pump thread: %s", strerror(-r));
        }
        if (r < 0)
                return r;
        s->pumping = true;
        return 0;
}

struct engine_egress_stream *engine_egress_stream_end(struct engine_egress_stream *s)
{
        if (!s)
                return NULL;
        if (s->pumping) {
                (void)!write(s->stop[1], "x", 1);
                pthread_join(s->pump, NULL);
        } else if (s->h) {
                curl_easy_cleanup(s->h);
        }
        for (size_t i = 0; i < BRIDGE_CONNS; i++)
                conn_close(&s->conns[i]);
        for (int i = 0; i < 2; i++)
                if (s->stop[i] >= 0)
                        close(s->stop[i]);
        if (s->sock[0])
                (void)unlink(s->sock);
        if (s->dir[0])
                (void)rmdir(s->dir);
        egress_frames_done(&s->fr);
        free(s);
        return NULL;
}
