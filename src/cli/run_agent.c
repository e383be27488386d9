/* run_agent.c - an agent preset turned into a run's extra options (run_agent.h). */
#include "cli/run_agent.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/presets.h"
#include "config/secrets.h"

static void add(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(**v));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

void run_agent_done(struct run_agent *a)
{
        a->own = config_strv_free(a->own);
        a->env = config_strv_free(a->env);
        free(a->net);
        a->net = NULL;
        config_preset_done(&a->preset);
}

/* The preset's home paths that exist and are no symlink (one to elsewhere would be bound at
 * its target, not where the agent looks for it: said, and left out). */
static char **own_paths(const struct config_preset *p, const char *agent)
{
        char **v = NULL;
        size_t n = 0;
        struct stat st;

        add(&v, &n, NULL);
        n = 0;
        for (size_t i = 0; p->home[i]; i++) {
                if (lstat(p->home[i], &st) < 0)
                        continue; /* not made yet: the agent writes it to the private $HOME */
                if (S_ISLNK(st.st_mode)) {
                        fprintf(stderr,
                                "vestibule-mcp run: --agent %s: %s is a symlink; it is left "
                                "out (the agent sees the private $HOME there): pass its "
                                "target with --allow and point the agent at it\n",
                                agent, p->home[i]);
                        continue;
                }
                add(&v, &n, xstrdup(p->home[i]));
        }
        return v;
}

/* "allowlist:" + the preset's hosts + the url-env hosts + the user's list. */
static char *net_list(const struct config_preset *p, const char *user_net)
{
        _cleanup_(config_strv_freep) char **url = config_preset_url_hosts(p);
        size_t cap = 16 + (user_net ? strlen(user_net) : 0), len;
        char *s;

        for (size_t i = 0; p->hosts[i]; i++)
                cap += strlen(p->hosts[i]) + 1;
        for (size_t i = 0; url[i]; i++)
                cap += strlen(url[i]) + 1;
        s = xcalloc(cap, 1);
        len = (size_t)sprintf(s, "allowlist:");
        for (size_t i = 0; p->hosts[i]; i++)
                len += (size_t)sprintf(s + len, "%s%s", i ? "," : "", p->hosts[i]);
        for (size_t i = 0; url[i]; i++)
                len += (size_t)sprintf(s + len, ",%s", url[i]);
        if (user_net)
                sprintf(s + len, ",%s", user_net + strlen("allowlist:"));
        return s;
}

int run_agent_resolve(const char *agent, const char *cmd, const char *user_net,
                      struct run_agent *ret)
{
        struct config_preset p = {0};
        struct sbx_error err = {0};
        const char *h = config_host_var("HOME");
        _cleanup_free_ char *home = h && h[0] == '/' ? realpath(h, NULL) : NULL;
        _cleanup_free_ char *base = xstrdup(cmd);
        size_t n = 0;

        if (user_net && strncmp(user_net, "allowlist:", 10) != 0) {
                fprintf(stderr,
                        "vestibule-mcp run: --agent %s --net %s: the agent needs its provider's "
                        "API; with --agent, --net allowlist:HOST,... adds hosts to the preset's "
                        "(see vestibule-mcp run --help)\n",
                        agent, user_net);
                return -1;
        }
        if (config_preset_load(agent, home, &p, &err) < 0) {
                fprintf(stderr, "vestibule-mcp run: --agent: %s\n", err.msg);
                return -1;
        }
        if (p.command && strcmp(basename(base), p.command) != 0)
                fprintf(stderr,
                        "vestibule-mcp run: note: --agent %s is for '%s', and the command is "
                        "'%s'; the preset applies anyway\n",
                        agent, p.command, cmd);
        ret->own = own_paths(&p, agent);
        ret->env = NULL;
        add(&ret->env, &n, NULL);
        n = 0;
        for (size_t i = 0; p.env[i]; i++)
                add(&ret->env, &n, xstrdup(p.env[i]));
        ret->net = net_list(&p, user_net);
        ret->preset = p;
        return 0;
}
