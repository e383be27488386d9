/* run_agent.h - `vestibule-mcp run --agent NAME -- CMD`: a built-in agent preset
 * (src/config/presets/NAME.preset, parsed by src/config/presets.c) turned into what the run
 * adds to the user's options: the agent's own state folders read-write and unmasked, the
 * variables it needs passed on, and an allowlist of its provider's hosts plus the user's.
 * Used by cmd_run_cmd.c only. docs/run-command.md. */
#pragma once

#include "config/presets.h"

/* What a preset adds to a run. Arrays NULL-ended, owned, as are the strings. */
struct run_agent {
        char **own; /* the agent's state under $HOME that exists, absolute (no link followed) */
        char **env; /* variable names to pass on (as --env) */
        char *net;  /* "allowlist:HOST,...": the preset's hosts, the url-env hosts, the user's */
        struct config_preset preset; /* the preset itself: its guard and readonly entries for
                                      * run_guard_begin() (src/cli/run_guard.h) */
};

/**
 * run_agent_resolve() - the built-in preset @agent for a run of @cmd (argv[0]; a different
 * command than the preset's gets a warning on stderr) with the user's --net @user_net (NULL,
 * "none" is refused, or "allowlist:HOSTS" whose hosts are added), into @ret.
 * Return: 0, or -1 with the reason and its fix on stderr (an unknown agent lists the known
 * ones; the caller exits 125).
 */
int run_agent_resolve(const char *agent, const char *cmd, const char *user_net,
                      struct run_agent *ret);

/** run_agent_done() - free what @a holds; @a may be all zero. */
void run_agent_done(struct run_agent *a);
