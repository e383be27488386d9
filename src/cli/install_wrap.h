/* install_wrap.h - `vestibule-mcp install-client --wrap NAME CLIENT` and `--unwrap NAME`: an MCP
 * server entry already in a client's file rewritten to start through `vestibule-mcp mcp wrap
 * [--allow DIR]... [--allow-read DIR]... [--net ...] [--env NAME]... -- COMMAND ARGS...` (its
 * env kept, each of its names passed on with --env), or back. The file work is
 * src/clients/wrap.c (read) and clients_install() (backup, flock, refusals). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "clients/clients.h"

/* The options of a wrap. Strings borrowed from argv. */
struct install_wrap {
        const char *name;  /* the entry to wrap or unwrap; NULL = no wrap asked */
        bool unwrap;       /* --unwrap NAME */
        const char **opts; /* "--allow", DIR, "--net", SPEC ... for mcp wrap; n_opts */
        size_t n_opts;
};

/**
 * install_wrap_opt() - take getopt_long()'s @opt (with @arg) into @w when it is one of the
 * wrap options ('w' --wrap, 'u' --unwrap, 'a' --allow, 'r' --allow-read, 'N' --net).
 * Return: true when it was one.
 */
bool install_wrap_opt(struct install_wrap *w, int opt, const char *arg);

/**
 * install_wrap_run() - wrap or unwrap @w->name in @c's file @file, backups into @backup_dir
 * (NULL: beside the file); @self and @self_args (@n_self) start vestibule-mcp (its path, or
 * npx -y vestibule-mcp). Says what it did, or why not and the fix, on stdout/stderr.
 * Frees @w->opts.
 * Return: the exit status: 0 done or nothing to do (already wrapped / not wrapped), 1 failed.
 */
int install_wrap_run(const struct client_info *c, const char *file, const char *backup_dir,
                     const char *self, const char *const *self_args, size_t n_self,
                     struct install_wrap *w);
