/* paths.c - where each client keeps its MCP configuration on macOS and Windows (for an entry
 * printed or written for another system than this one: `install-client --docker --os`), and
 * on the Windows side of a WSL 2 machine (`install-client --wsl`). See clients.h. */
#include "clients/clients.h"

#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

/* Per client: the macOS path below the home folder, and the Windows one below a Windows
 * variable (%APPDATA% = <profile>\AppData\Roaming, %USERPROFILE%). Sources: Claude Desktop
 * modelcontextprotocol.io/quickstart/user; Cursor docs.cursor.com/context/mcp; VS Code
 * code.visualstudio.com/docs/configure/settings (user settings folder); Claude Code
 * docs.claude.com/en/docs/claude-code/settings (~/.claude.json). */
static const struct os_paths {
        const char *id;
        const char *macos;    /* below $HOME */
        const char *win_var;  /* "APPDATA" or "USERPROFILE" */
        const char *win_path; /* below it, with '/' (turned into '\' for printing) */
} os_paths[] = {
    {"claude-desktop", "Library/Application Support/Claude/claude_desktop_config.json", "APPDATA",
     "Claude/claude_desktop_config.json"},
    {"cursor", ".cursor/mcp.json", "USERPROFILE", ".cursor/mcp.json"},
    {"vscode", "Library/Application Support/Code/User/mcp.json", "APPDATA", "Code/User/mcp.json"},
    {"claude-code", ".claude.json", "USERPROFILE", ".claude.json"},
};

static const struct os_paths *find(const struct client_info *c)
{
        for (size_t i = 0; c && i < ELEMENTSOF(os_paths); i++)
                if (strcmp(os_paths[i].id, c->id) == 0)
                        return &os_paths[i];
        return NULL;
}

char *clients_os_path(const struct client_info *c, enum client_os os, const char *home)
{
        const struct os_paths *p = find(c);
        char *s;

        if (os == CLIENT_OS_LINUX)
                return clients_default_path(c, home, NULL);
        if (!p)
                return NULL;
        if (os == CLIENT_OS_MACOS)
                return xasprintf("%s/%s", home && *home ? home : "~", p->macos);
        s = xasprintf("%%%s%%\\%s", p->win_var, p->win_path);
        for (char *q = s; *q; q++)
                if (*q == '/')
                        *q = '\\';
        return s;
}

int clients_wsl_path(const struct client_info *c, const char *win_home, char **ret_path,
                     char **ret_folder)
{
        const struct os_paths *p = find(c);

        if (!p || (strcmp(p->id, "claude-desktop") != 0 && strcmp(p->id, "cursor") != 0))
                return -1;
        if (strcmp(p->win_var, "APPDATA") == 0) {
                *ret_folder = xasprintf("%s/AppData/Roaming", win_home);
                *ret_path = xasprintf("%s/%s", *ret_folder, p->win_path);
        } else {
                *ret_folder = xstrdup(win_home);
                *ret_path = xasprintf("%s/%s", win_home, p->win_path);
        }
        return 0;
}
