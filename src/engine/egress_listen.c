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

const char *engine_egress_wait_bridge_script(uint16_t port, char *buf, size_t size)
{
        /* as egress_relay_wait_script(), but the listener is the bridge the server starts by
         * exec (egress_stream.c): wait for it until bash's $SECONDS passes 10 s (a deadline,
         * not a count of rounds: on a loaded host 1000 rounds of `sleep 0.01` took over a
         * minute). $1 and $2 (the relays' sources of the local path, "" here) are dropped. */
        snprintf(
            buf, size,
            "shift 2; e=$((SECONDS + 11)); until [[ \"$(</proc/net/tcp)\" == *\" 0100007F:%04X "
            "00000000:0000 0A \"* ]]; "
            "do (( SECONDS < e )) || { echo \"vestibule: the egress bridge did not listen "
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
