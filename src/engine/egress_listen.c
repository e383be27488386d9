/* egress_listen.c - the container backend's end of the egress allowlist (docs/design/egress.md,
 * "Container backend"): the sandbox container keeps NetworkMode none (its own network
 * namespace with only lo). The run's proxy listens on a unix socket in the run's private code
 * folder, which the container sees read-only at /sandbox; a relay that the container's command
 * starts before the code (a few lines of the image's own python3 or node) listens on
 * 127.0.0.1:EGRESS_PORT inside and copies each connection's bytes to that socket. The relay
 * decides nothing: the proxy does, so code that kills or replaces the relay, or connects to the
 * socket itself, reaches exactly what the proxy allows.
 *
 * Nothing here enters the container's namespaces (no setns(2), no /proc of the engine's
 * processes): it works for a server in the docker group talking to rootful Docker, for a root
 * server, and for rootless engines alike, as long as the engine sees this machine's files (the
 * code folder is a bind mount). A unix socket reached by path is not tied to a network
 * namespace (unix(7)), and connect(2) needs write permission on the socket file, which a
 * read-only mount does not take away (only regular files, folders and links are refused
 * writes on one: path_permission() in the kernel's fs/namei.c). */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "egress/egress.h"

/* The relay in Python: one thread per direction of each connection; `python3 -I` (isolated:
 * neither the working folder nor the user site nor PYTHON* variables are on its path, so a
 * socket.py in /workspace cannot stand in for the standard module). %s: the socket's path, %u
 * the port. When the proxy's socket refuses (the proxy ended), the relay stops listening
 * (shutdown(2) of a listening socket: a thread blocked in accept() holds it open otherwise),
 * resets the client's connection (SO_LINGER 0: an RST) and ends, so every later connection is
 * refused: the proxy's death closes the way out for good, as on the native backend. */
static const char relay_py[] =
    "import os,socket as S,struct,threading as T\n"
    "P='%s'\n"
    "def cp(a,b):\n"
    " try:\n"
    "  while 1:\n"
    "   d=a.recv(65536)\n"
    "   if not d:break\n"
    "   b.sendall(d)\n"
    " except OSError:pass\n"
    " try:b.shutdown(S.SHUT_WR)\n"
    " except OSError:pass\n"
    "def one(c):\n"
    " u=S.socket(S.AF_UNIX)\n"
    " try:u.connect(P)\n"
    " except OSError:\n"
    "  l.shutdown(S.SHUT_RDWR)\n"
    "  c.setsockopt(S.SOL_SOCKET,S.SO_LINGER,struct.pack('ii',1,0));c.close();os._exit(3)\n"
    " t=T.Thread(target=cp,args=(u,c),daemon=1);t.start();cp(c,u);t.join();c.close();u.close()\n"
    "l=S.socket();l.setsockopt(S.SOL_SOCKET,S.SO_REUSEADDR,1)\n"
    "l.bind(('127.0.0.1',%u));l.listen(128)\n"
    "while 1:\n"
    " c=l.accept()[0];T.Thread(target=one,args=(c,),daemon=1).start()\n";

/* The relay in Node: net's pipes, half-open both ways (a client that ends its request still
 * gets the answer); an error on either side destroys the other, and the proxy's socket
 * refusing (the proxy ended) resets the client's connection and ends the relay, as the
 * Python one does. 'node:net' is the built-in module whatever NODE_PATH holds. */
static const char relay_js[] =
    "const n=require('node:net');"
    "const s=n.createServer({allowHalfOpen:true},c=>{"
    "const u=n.connect({path:'%s',allowHalfOpen:true});"
    "c.on('error',()=>u.destroy());"
    "u.on('error',e=>{const gone=e.code==='ECONNREFUSED'||e.code==='ENOENT';"
    "if(gone)s.close();c.resetAndDestroy();if(gone)process.exit(3);});"
    "c.pipe(u);u.pipe(c);"
    "});s.listen(%u,'127.0.0.1');";

int engine_egress_relay(const char *relay, const char *sock_path, uint16_t port, char *buf,
                        size_t size)
{
        int n;

        if (strchr(sock_path, '\'') || strchr(sock_path, '\\') || strchr(sock_path, '\n'))
                return -EINVAL;
        if (strcmp(relay, "node") == 0)
                n = snprintf(buf, size, relay_js, sock_path, (unsigned)port);
        else if (strcmp(relay, "python3") == 0)
                n = snprintf(buf, size, relay_py, sock_path, (unsigned)port);
        else
                return -EINVAL;
        return n < 0 || (size_t)n >= size ? -ENOSPC : 0;
}

const char *engine_egress_wait_script(uint16_t port, char *buf, size_t size)
{
        /* $1 the relay in Python, $2 in Node, then the code's command. python3 when the
         * image has it (both of ours do; it starts faster than node), else node. The relay is
         * started in the background of a command substitution's subshell, which ends at once:
         * the container's init (docker-init, catatonit) becomes its parent, never the code (a
         * `wait` of the code cannot hang on it).
         * /proc/net/tcp: "sl local rem st ...", IPv4 in host byte order as hex (x86 and arm64:
         * little-endian, 127.0.0.1 = 0100007F), state 0A = LISTEN (proc(5), "/proc/net/tcp").
         * A relay that ended (no interpreter, the port taken) stops the run before its code:
         * exit 125 with the reason on stderr. Bash only, but sleep. */
        snprintf(buf, size,
                 "if command -v python3 >/dev/null; then i=python3; else i=node; fi; "
                 "r=$({ if [[ $i == node ]]; then exec node -e \"$2\"; else exec python3 -Ic "
                 "\"$1\"; fi; } </dev/null >/dev/null 2>&1 & echo $!); shift 2; "
                 "until [[ \"$(</proc/net/tcp)\" == *\" 0100007F:%04X 00000000:0000 0A \"* ]]; do "
                 "kill -0 \"$r\" 2>/dev/null || { echo \"vestibule: the egress relay ($i) ended "
                 "before it listened: network allowlist needs python3 or node in this image; "
                 "the code did not run\" >&2; exit 125; }; sleep 0.01; done; exec \"$@\"",
                 (unsigned)port);
        return buf;
}

const char *engine_egress_wait_bridge_script(uint16_t port, char *buf, size_t size)
{
        /* as engine_egress_wait_script(), but the listener is the bridge the server starts by
         * exec (egress_stream.c): wait for it, 1000 rounds of at least 10 ms. $1 and $2 (the
         * relays' sources of the local path, "" here) are dropped. */
        snprintf(
            buf, size,
            "shift 2; n=0; until [[ \"$(</proc/net/tcp)\" == *\" 0100007F:%04X 00000000:0000 "
            "0A \"* ]]; "
            "do (( ++n < 1000 )) || { echo \"vestibule: the egress bridge did not listen "
            "within 10 s: network allowlist on this engine needs python3 or node in the image; the "
            "code did not run\" >&2; exit 125; }; sleep 0.01; done; exec \"$@\"",
            (unsigned)port);
        return buf;
}

int engine_egress_begin(const char *code_dir, const struct sbx_config *cfg,
                        struct egress_session **ret, struct sbx_error *err)
{
        _cleanup_free_ char *path = NULL;
        int fd = -1, r;

        if (asprintf(&path, "%s/%s", code_dir, ENGINE_EGRESS_SOCK) < 0)
                return sbx_fail(err, ENOMEM, "egress: out of memory");
        r = egress_listen_unix(path, &fd, err);
        if (r < 0)
                return sbx_wrap(err, "egress: the proxy's socket in the run's code folder; "
                                     "nothing was run");
        /* fd is taken by the session, on success and on error */
        r = egress_session_start(cfg, fd, ret, err);
        if (r < 0) {
                engine_egress_end(code_dir);
                return sbx_wrap(err, "egress: the proxy did not start; nothing was run");
        }
        return 0;
}

void engine_egress_end(const char *code_dir)
{
        _cleanup_free_ char *path = NULL;

        if (code_dir && asprintf(&path, "%s/%s", code_dir, ENGINE_EGRESS_SOCK) >= 0)
                (void)unlink(path);
}
