/* relay.c - the relay a sandbox without a network of its own runs before its code, for the
 * egress allowlist (docs/design/egress.md, "Container backend" and "gVisor backend"): a few
 * lines of the image's own python3 or node that listen on 127.0.0.1:EGRESS_PORT inside the
 * sandbox's network namespace and copy each connection's bytes to the run's proxy's unix
 * socket, deciding nothing (the proxy does). Used by the container backend (src/engine) and
 * the gvisor backend (src/gvisor): both reach the socket through the code folder, /sandbox. */
#include "egress/egress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

int egress_relay_source(const char *relay, const char *sock_path, uint16_t port, char *buf,
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

const char *egress_relay_wait_script(uint16_t port, char *buf, size_t size)
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
