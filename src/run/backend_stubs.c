/* backend_stubs.c - weak stand-ins for constructors other modules define, so the binary links
 * before they land. The strong definitions win: they sort earlier in the static library
 * (src/engine, src/mcp, src/native come before src/run), and the linker takes the first
 * archive member that defines a symbol. Keep any stub here for a module that sorts earlier. */
#include <errno.h>

#include "mcp/mcp.h"
#include "run/backend.h"

__attribute__((weak)) int native_backend_new(const struct sbx_config *cfg, struct backend **ret,
                                             struct sbx_error *err)
{
        (void)cfg;
        (void)ret;
        return sbx_fail(err, ENOSYS,
                        "native backend not built yet: use VESTIBULE_BACKEND=container or naive "
                        "(restart after changing it)");
}

__attribute__((weak)) int engine_backend_new(const struct sbx_config *cfg, struct backend **ret,
                                             struct sbx_error *err)
{
        (void)cfg;
        (void)ret;
        return sbx_fail(err, ENOSYS,
                        "container backend not built yet: use VESTIBULE_BACKEND=native or naive "
                        "(restart after changing it)");
}

__attribute__((weak)) int mcp_serve(const struct mcp_handlers *handlers, int in_fd, int out_fd,
                                    struct sbx_error *err)
{
        (void)handlers;
        (void)in_fd;
        (void)out_fd;
        return sbx_fail(err, ENOSYS, "the MCP server is not built yet in this binary");
}
