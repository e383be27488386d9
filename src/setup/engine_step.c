/* engine_step.c - the engine half of `vestibule-mcp setup` for a rootfs tarball: after the
 * native install, import the same tarball into the container engine (when one answers) under
 * the name the container backend runs for that language (engine_image_for() with
 * VESTIBULE_IMAGE_SOURCE=debian), and the MCP config lines printed at the end. */
#include "setup/setup_run.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "engine/engine.h"

/* The name a tarball for @language is imported under: the backend's name for it once the
 * image source is debian. */
static const char *import_name(const struct sbx_config *cfg, const char *language)
{
        struct sbx_config c = *cfg;

        c.image_source = SBX_IMAGE_SOURCE_DEBIAN;
        return engine_image_for(&c, language);
}

/* 1: an image @ref that Vestibule imported is there, 0: absent, -ENOTUNIQ: a foreign image holds
 * that name, -errno: no engine answers. */
static int engine_has(const struct setup_run_args *a, const char *ref, struct sbx_error *err)
{
        struct engine_conn c;
        char mark[8] = "";
        int r;

        r = engine_connect(a->cfg, NULL, &c, err);
        if (r < 0)
                return r;
        r = engine_image_label(&c, ref, "vestibule.image", mark, sizeof(mark), err);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (strcmp(mark, "1") != 0)
                return sbx_fail(err, ENOTUNIQ,
                                "refusing to replace '%s' in the container engine: it is not an "
                                "image Vestibule imported (no vestibule.image label); set "
                                "VESTIBULE_IMAGE_%s to another name or remove that image",
                                ref,
                                strcmp(ref, import_name(a->cfg, "node")) == 0 ? "NODE" : "PYTHON");
        return 1;
}

/* The engine's image ID ("sha256:...") of @ref into @ret, "" when it cannot say. */
static void image_id(const struct setup_run_args *a, const char *ref, char *ret, size_t size)
{
        _cleanup_(json_putp) json_object *info = NULL;
        struct engine_conn c;
        struct sbx_error e = {0};
        json_object *id;

        ret[0] = '\0';
        if (engine_connect(a->cfg, engine_env_getenv, &c, &e) < 0 ||
            engine_image_inspect(&c, ref, &info, &e) < 0 ||
            !json_object_object_get_ex(info, "Id", &id))
                return;
        snprintf(ret, size, "%s", json_object_get_string(id));
}

int setup_engine_present(const struct setup_run_args *a, const char *language)
{
        struct sbx_error e = {0};
        const char *ref;

        if (!a->cfg)
                return -ENOENT;
        ref = import_name(a->cfg, language);
        if (strchr(ref, '@'))
                return -EINVAL;
        return engine_has(a, ref, &e);
}

int setup_engine_import(const struct setup_run_args *a, const char *language, const char *tar,
                        struct sbx_error *err)
{
        FILE *p = a->progress ? a->progress : stderr;
        struct sbx_error e = {0};
        const char *ref;
        int r;

        if (!a->cfg)
                return 0;
        ref = import_name(a->cfg, language);
        if (strchr(ref, '@')) {
                /* An imported tarball has no registry digest: it cannot be what a digest names. */
                fprintf(a->out,
                        "setup: not importing %s into the container engine: VESTIBULE_IMAGE_%s is "
                        "pinned to '%s', which only its registry can provide\n",
                        language, strcmp(language, "node") == 0 ? "NODE" : "PYTHON", ref);
                return 0;
        }
        r = engine_has(a, ref, &e);
        if (r == -ENOTUNIQ) {
                *err = e;
                return r;
        }
        if (r < 0) {
                fprintf(a->out,
                        "setup: no container engine answers, %s not imported (the native "
                        "backend may be enough): %s\n",
                        language, e.msg);
                a->state->no_engine = true;
                return 0;
        }
        fprintf(p,
                "setup: %s: making '%s' present in the container engine (importing '%s' "
                "unless an image of the same tarball is there)\n",
                language, ref, tar);
        fflush(p);
        r = engine_setup_import(a->cfg, tar, ref, err);
        if (r < 0)
                return sbx_wrap(err, "importing the %s rootfs into the container engine", language);
        {
                char id[80] = "";

                image_id(a, ref, id, sizeof(id));
                fprintf(
                    a->out, "setup: %s image %s in the container engine as '%s' (image ID %s)\n",
                    language, r == 1 ? "imported" : "already present", ref, id[0] ? id : "unknown");
        }
        a->state->imported_debian = true;
        return 0;
}

/* The process environment without the VESTIBULE_* settings: config_load_from() with it gives
 * the defaults as this user would get them (HOME, XDG_*). */
static const char *getenv_no_settings(const char *name)
{
        if (strncmp(name, "VESTIBULE_", 10) == 0)
                return NULL;
        return config_process_getenv(name);
}

static bool str_differs(const char *a, const char *b)
{
        return (a || b) && (!a || !b || strcmp(a, b) != 0);
}

static void add_env(json_object *env, const char *key, const char *value)
{
        json_object_object_add(env, key, json_object_new_string(value));
}

/* 'value' for a POSIX shell. */
static void fput_shell_quoted(FILE *f, const char *s)
{
        fputc('\'', f);
        for (; *s; s++) {
                if (*s == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*s, f);
        }
        fputc('\'', f);
}

void setup_print_mcp_config(const struct setup_run_args *a)
{
        _cleanup_(json_putp) json_object *env = NULL, *root = NULL;
        struct sbx_config *def = NULL;
        const struct sbx_config *c = a->cfg;
        struct sbx_error e = {0};
        char exe[PATH_MAX] = "", run_as[48];
        bool debian;
        ssize_t n;

        if (!c)
                return;
        if (config_load_from(getenv_no_settings, NULL, &def, &e) < 0)
                return;
        if (a->exe) {
                snprintf(exe, sizeof(exe), "%s", a->exe);
        } else {
                n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                exe[n > 0 ? n : 0] = '\0';
                if (n <= 0)
                        snprintf(exe, sizeof(exe), "vestibule-mcp");
        }
        env = json_object_new_object();
        if (str_differs(a->rootfs_dir, def->rootfs_dir))
                add_env(env, "VESTIBULE_ROOTFS_DIR", a->rootfs_dir);
        if (str_differs(c->workspace_dir, def->workspace_dir))
                add_env(env, "VESTIBULE_WORKSPACE", c->workspace_dir);
        if (str_differs(c->audit_dir, def->audit_dir))
                add_env(env, "VESTIBULE_AUDIT_DIR", c->audit_dir);
        if (c->backend != def->backend)
                add_env(env, "VESTIBULE_BACKEND", config_backend_name(c->backend));
        if (c->runtime != def->runtime)
                add_env(env, "VESTIBULE_RUNTIME", config_runtime_name(c->runtime));
        debian =
            c->image_source == SBX_IMAGE_SOURCE_DEBIAN || (a->state && a->state->imported_debian);
        if (debian)
                add_env(env, "VESTIBULE_IMAGE_SOURCE", "debian");
        if (str_differs(c->image_python, def->image_python))
                add_env(env, "VESTIBULE_IMAGE_PYTHON", c->image_python);
        if (str_differs(c->image_node, def->image_node))
                add_env(env, "VESTIBULE_IMAGE_NODE", c->image_node);
        if (c->run_as_set) {
                snprintf(run_as, sizeof(run_as), "%u:%u", (unsigned)c->run_as_uid,
                         (unsigned)c->run_as_gid);
                add_env(env, "VESTIBULE_RUN_AS", run_as);
        }
        config_free(def);

        fprintf(a->out, "setup: add Vestibule to your MCP client, with these settings:\n  claude "
                        "mcp add vestibule");
        json_object_object_foreach(env, key, val)
        {
                _cleanup_free_ char *kv = xasprintf("%s=%s", key, json_object_get_string(val));

                fputs(" -e ", a->out);
                fput_shell_quoted(a->out, kv);
        }
        fputs(" -- ", a->out);
        fput_shell_quoted(a->out, exe);
        fputs("\n  or in its JSON config:\n  ", a->out);
        root = json_object_new_object();
        {
                json_object *servers = json_object_new_object();
                json_object *srv = json_object_new_object();

                json_object_object_add(srv, "command", json_object_new_string(exe));
                json_object_object_add(srv, "args", json_object_new_array());
                json_object_object_add(srv, "env", json_object_get(env));
                json_object_object_add(servers, "vestibule", srv);
                json_object_object_add(root, "mcpServers", servers);
        }
        fprintf(a->out, "%s\n",
                json_object_to_json_string_ext(root, JSON_C_TO_STRING_SPACED |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
}

int setup_engine_pull(const struct setup_run_args *a, const char *language, const char *image,
                      struct sbx_error *err)
{
        FILE *p = a->progress ? a->progress : stderr;
        struct engine_conn c;
        struct sbx_error e = {0};
        int r;

        if (!a->cfg || a->native_only)
                return 0;
        if (engine_connect(a->cfg, NULL, &c, &e) < 0) {
                fprintf(a->out,
                        "setup: no container engine answers, %s image not pulled into it (the "
                        "native backend may be enough): %s\n",
                        language, e.msg);
                a->state->no_engine = true;
                return 0;
        }
        fprintf(p, "setup: %s: making '%s' present in the container engine (by digest)\n", language,
                image);
        fflush(p);
        r = engine_setup_pull(a->cfg, image, a->progress, a->progress_tty, err);
        if (r < 0)
                return sbx_wrap(err, "pulling the %s image into the container engine", language);
        fprintf(a->out, "setup: %s image %s in the container engine: '%s'\n", language,
                r == 1 ? "pulled" : "already present", image);
        a->state->engine_pulled = true;
        return 0;
}
