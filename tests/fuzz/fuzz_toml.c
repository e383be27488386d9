/* fuzz_toml.c - libFuzzer target: the editor of Codex's ~/.codex/config.toml behind
 * install-client (src/clients/toml.c), on any bytes as the user's file could hold (its text up
 * to the first NUL byte). Each input goes through the three entry points: the merge of our
 * [mcp_servers.vestibule] table (clients_toml_merge()), the command rewrite of --wrap
 * (clients_toml_set_command()) and the entry read back (clients_toml_read_entry(), for our
 * name and for "fs"). Checked, besides crashes, leaks and UB: a message that is NUL-terminated;
 * what the merge wrote is read by the merge again and not changed by it (a rerun changes
 * nothing); what the rewrite wrote, when read back, holds our command and args, and a second
 * rewrite changes nothing. A violation aborts; a refused file is a normal outcome.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh toml SECONDS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clients/toml.h"
#include "common/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Escapes in every value we write: a quote, a backslash, a newline, a control character. */
static const char *const args[] = {"mcp", "--x=\"q\"", "a\\b\nc\001"};
static const char *const env[] = {"VESTIBULE_WORKSPACE=/w \"s\"", "B=\t\\"};
static const struct client_server ours = {
    .name = "vestibule",
    .command = "/usr/bin/vestibule-mcp",
    .args = args,
    .n_args = 3,
    .env = env,
    .n_env = 2,
};

static void check_msg(const struct sbx_error *err)
{
        if (strnlen(err->msg, sizeof(err->msg)) == sizeof(err->msg))
                abort();
}

/* @text read back holds our command and args, when it reads at all. */
static void check_command(const char *text)
{
        struct client_entry e = {0};
        struct sbx_error err = {0};

        if (clients_toml_read_entry(text, ours.name, &e, &err) < 0) {
                check_msg(&err);
                return;
        }
        if (strcmp(e.command, ours.command) != 0 || e.n_args != ours.n_args)
                abort();
        for (size_t i = 0; i < e.n_args; i++)
                if (strcmp(e.args[i], ours.args[i]) != 0)
                        abort();
        clients_entry_done(&e);
}

static void fuzz_merge(const char *text)
{
        char *out = NULL, *again = NULL, *kept = NULL;
        struct sbx_error err = {0};

        if (clients_toml_merge(text, &ours, &out, &kept, &err) < 0) {
                check_msg(&err);
                return;
        }
        free(kept);
        if (!out)
                return;
        /* a rerun reads what the first run wrote, and changes nothing */
        if (clients_toml_merge(out, &ours, &again, NULL, &err) < 0 || again)
                abort();
        check_command(out);
        free(out);
}

static void fuzz_set_command(const char *text)
{
        char *out = NULL, *again = NULL;
        struct sbx_error err = {0};

        if (clients_toml_set_command(text, &ours, &out, &err) < 0) {
                check_msg(&err);
                return;
        }
        if (!out)
                return;
        check_command(out);
        if (clients_toml_set_command(out, &ours, &again, &err) < 0 || again)
                abort();
        free(out);
}

static void fuzz_read(const char *text, const char *name)
{
        struct client_entry e = {0};
        struct sbx_error err = {0};

        if (clients_toml_read_entry(text, name, &e, &err) < 0)
                check_msg(&err);
        else
                clients_entry_done(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = xmalloc(size + 1);

        memcpy(text, data, size);
        text[size] = '\0';
        fuzz_merge(text);
        fuzz_set_command(text);
        fuzz_read(text, ours.name);
        fuzz_read(text, "fs");
        free(text);
        return 0;
}
