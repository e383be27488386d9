/* config.c - VESTIBULE_* settings from the environment over an optional flat YAML file.
 *
 * Every setting goes through the same steps: take the environment's value, else the file's,
 * else the default text; trim spaces and tabs; a blank value counts as unset; then parse it by
 * its kind. A bad value never fails the load: it is recorded in ->invalid / ->invalid_msg, the
 * field keeps its default, and the server answers every tool call Blocked: with that text.
 * The first invalid setting gets the full message (its name, the bad value, the rule and where
 * to fix it); any further ones are named after it, so the user can fix them all in one go.
 *
 * Decisions worth knowing:
 *  - Numbers are plain decimal digits only: no sign, no unit suffix, no 0, no overflow. Each
 *    has a ceiling far above any sane value, so later arithmetic (MiB -> bytes, s -> ms,
 *    twice the output cap) can never overflow.
 *  - VESTIBULE_CPU_PCT is not checked against this host's CPU count: a cap above what the
 *    machine has simply never binds, and the same MCP config is often shared between
 *    machines. It is capped at 100000 (1000 cores).
 *  - Paths: '~' and '~/...' expand with $HOME (else the password database); '~user' is not
 *    supported. After expansion a path must be absolute, must not be '/', and must not hold a
 *    '..' component (the audit folder's outside-the-workspace rule compares paths, and '..'
 *    would make a lexical comparison lie). '.' components, repeated and trailing '/' are
 *    dropped.
 *  - The workspace, the rootfs folder and the audit folder must not lie inside one another
 *    (compared here as written; the audit module compares resolved paths again): sandboxed
 *    code writes to the workspace, and must reach neither the images nor the audit records.
 *  - VESTIBULE_DEFAULT_TIMEOUT_S must not exceed VESTIBULE_MAX_TIMEOUT_S.
 *  - In the file, a YAML null (`key:`, `key: ~`, `key: null`) counts as unset, like blank. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lazy/yaml.h"

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/pins.h"

#define CONFIG_FILE_MAX_BYTES ((size_t)1024 * 1024)

enum setting_kind {
        KIND_PATH,
        KIND_BOOL,
        KIND_UINT,  /* unsigned field */
        KIND_COUNT, /* unsigned field, 0 allowed */
        KIND_SIZE,  /* size_t field */
        KIND_BACKEND,
        KIND_RUNTIME,
        KIND_IMAGE_SOURCE,
        KIND_IMAGE,
        KIND_RUN_AS,
        KIND_LOG_LEVEL,
        KIND_TRACE,
        KIND_RAW, /* a string kept as given (trimmed); checked after the loop */
};

struct setting {
        const char *key; /* YAML key; the variable is VESTIBULE_ + upper case */
        enum setting_kind kind;
        const char *def;        /* default, as text, parsed like a user value; NULL = unset */
        size_t offset;          /* of the field in struct sbx_config */
        unsigned long long max; /* numbers: the largest accepted value */
        const char *rule;       /* numbers: "a positive whole number of MiB, e.g. 256" */
};

#define F(field) offsetof(struct sbx_config, field)

static const struct setting settings[] = {
    {"workspace", KIND_PATH, "~/.vestibule/workspace", F(workspace_dir), 0, NULL},
    {"workspace_ro", KIND_BOOL, "off", F(workspace_ro), 0, NULL},
    {"runtime", KIND_RUNTIME, "auto", F(runtime), 0, NULL},
    {"container_runtime", KIND_RAW, NULL, F(container_runtime), 0, NULL},
    {"backend", KIND_BACKEND, "auto", F(backend), 0, NULL},
    {"image_python", KIND_IMAGE, SBX_PIN_IMAGE_PYTHON, F(image_python), 0, NULL},
    {"image_node", KIND_IMAGE, SBX_PIN_IMAGE_NODE, F(image_node), 0, NULL},
    {"image_source", KIND_IMAGE_SOURCE, "registry", F(image_source), 0, NULL},
    {"rootfs_dir", KIND_PATH, "~/.vestibule/rootfs", F(rootfs_dir), 0, NULL},
    {"audit_dir", KIND_PATH, "~/.vestibule/audit", F(audit_dir), 0, NULL},
    {"default_timeout_s", KIND_UINT, "10", F(default_timeout_s), 86400,
     "a positive whole number of seconds, e.g. 10"},
    {"max_timeout_s", KIND_UINT, "60", F(max_timeout_s), 86400,
     "a positive whole number of seconds, e.g. 60"},
    {"max_code_bytes", KIND_SIZE, "262144", F(max_code_bytes), 1024ULL * 1024 * 1024,
     "a positive whole number of bytes, e.g. 262144"},
    {"max_output_bytes", KIND_SIZE, "20000", F(max_output_bytes), 1024ULL * 1024 * 1024,
     "a positive whole number of bytes, e.g. 20000"},
    {"mem_mb", KIND_UINT, "256", F(mem_mb), 1024ULL * 1024,
     "a positive whole number of MiB, e.g. 256"},
    {"cpu_pct", KIND_UINT, "75", F(cpu_pct), 100000,
     "a positive whole percentage of one core, e.g. 75 (200 = two cores)"},
    {"pids_max", KIND_UINT, "128", F(pids_max), 4194304,
     "a positive whole number of processes, e.g. 128"},
    {"tmpfs_mb", KIND_UINT, "64", F(tmpfs_mb), 1024ULL * 1024,
     "a positive whole number of MiB, e.g. 64"},
    {"max_concurrent", KIND_UINT, "4", F(max_concurrent), 1024,
     "a positive whole number of runs, e.g. 4"},
    {"max_images", KIND_COUNT, "4", F(max_images), 64,
     "a whole number of images, e.g. 4 (0: attach none)"},
    {"max_sessions", KIND_COUNT, "4", F(max_sessions), 64,
     "a whole number of sessions, e.g. 4 (0: no sessions)"},
    {"session_idle_s", KIND_UINT, "900", F(session_idle_s), 86400ULL * 7,
     "a positive whole number of seconds, e.g. 900"},
    {"max_image_bytes", KIND_SIZE, "1048576", F(max_image_bytes), 16ULL * 1024 * 1024,
     "a positive whole number of bytes, e.g. 1048576"},
    {"warm", KIND_BOOL, "on", F(warm), 0, NULL},
    {"warm_idle_s", KIND_UINT, "300", F(warm_idle_s), 86400,
     "a positive whole number of seconds, e.g. 300"},
    {"run_as", KIND_RUN_AS, NULL, 0, 0, NULL},
    {"log_level", KIND_LOG_LEVEL, "info", F(log_level), 0, NULL},
    {"trace", KIND_TRACE, "off", F(trace_timing), 0, NULL},
    {"egress_allow", KIND_RAW, NULL, F(egress.allow_raw), 0, NULL},
    {"egress_ports", KIND_RAW, NULL, F(egress.ports_raw), 0, NULL},
    {"egress_pin", KIND_RAW, NULL, F(egress.pin_raw), 0, NULL},
};

enum value_source {
        SRC_DEFAULT = 0,
        SRC_ENV,
        SRC_FILE,
};

struct file_entry {
        char *key;
        char *value; /* NULL: YAML null */
        size_t line; /* 1-based */
};

struct load_ctx {
        const char *(*getenv_fn)(const char *name);
        const char *home; /* NULL when unknown */
        const char *file; /* the config file's path, for messages; NULL = none */
        struct file_entry *entries;
        size_t n_entries;
        struct sbx_config *c;
        char also[200]; /* names of further invalid settings */
        bool home_missing;
};

/* --- small helpers ----------------------------------------------------------------------- */

static void var_name(const char *key, char *buf, size_t size)
{
        size_t n = (size_t)snprintf(buf, size, "VESTIBULE_%s", key);

        for (size_t i = 10; i < n && i < size; i++)
                buf[i] = (char)toupper((unsigned char)buf[i]);
}

/* snprintf into a fixed message buffer; a message that does not fit is cut at its end. */
static void __attribute__((format(printf, 3, 4)))
msg_printf(char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
}

/* A user value shown inside a message: at most 80 bytes, control and non-ASCII bytes as \xNN,
 * so a message can carry neither terminal escapes nor invalid UTF-8. */
static void show_value(const char *v, char *buf, size_t size)
{
        size_t o = 0, i;

        for (i = 0; v[i] && o + 8 < size; i++) {
                unsigned char ch = (unsigned char)v[i];
                if (o >= 80) {
                        o += (size_t)snprintf(buf + o, size - o, "...");
                        break;
                }
                if (ch < 0x20 || ch >= 0x7f || ch == '\'')
                        o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
                else
                        buf[o++] = (char)ch;
        }
        buf[o] = '\0';
}

/* Trim spaces and tabs at both ends into a new string; NULL when blank (= unset). */
static char *trimmed(const char *v)
{
        const char *end;

        if (!v)
                return NULL;
        while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r')
                v++;
        end = v + strlen(v);
        while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
                end--;
        if (end == v)
                return NULL;
        return xstrndup(v, (size_t)(end - v));
}

static void add_also(struct load_ctx *x, const char *name)
{
        size_t n = strlen(x->also);

        if (n + strlen(name) + 3 >= sizeof(x->also))
                return;
        snprintf(x->also + n, sizeof(x->also) - n, "%s%s", n ? ", " : "", name);
}

/* Record an invalid setting. @what: why the value is wrong ("must be ..."). */
static void __attribute__((format(printf, 5, 6)))
mark_invalid(struct load_ctx *x, const struct setting *s, enum value_source src, const char *value,
             const char *fmt, ...)
{
        char var[64], shown[100], why[300];
        struct sbx_config *c = x->c;
        va_list ap;

        /* A default that cannot apply (no home for '~') leaves the field unset; load() then
         * reports the missing home, unless a user value filled the field. */
        if (src == SRC_DEFAULT)
                return;
        var_name(s->key, var, sizeof(var));
        if (c->invalid) {
                if (src == SRC_FILE) {
                        char n[96];
                        snprintf(n, sizeof(n), "%s in the config file", s->key);
                        add_also(x, n);
                } else
                        add_also(x, var);
                return;
        }
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        show_value(value, shown, sizeof(shown));
        c->invalid = true;
        if (src == SRC_FILE)
                msg_printf(
                    c->invalid_msg, sizeof(c->invalid_msg),
                    "invalid setting %s='%s' in the config file '%s': %s; fix it in that file "
                    "(or set %s in the MCP client's env for vestibule) and restart the server",
                    s->key, shown, x->file, why, var);
        else
                msg_printf(c->invalid_msg, sizeof(c->invalid_msg),
                           "invalid setting %s='%s': %s; fix it in the MCP client's env for "
                           "vestibule and restart the server",
                           var, shown, why);
}

/* Invalid state that is not one value: the config file itself, or a cross check. */
static void __attribute__((format(printf, 3, 4)))
mark_invalid_text(struct load_ctx *x, const char *name, const char *fmt, ...)
{
        va_list ap;

        if (x->c->invalid) {
                add_also(x, name);
                return;
        }
        x->c->invalid = true;
        va_start(ap, fmt);
        vsnprintf(x->c->invalid_msg, sizeof(x->c->invalid_msg), fmt, ap);
        va_end(ap);
}

/* --- value parsers: return 0, or -EINVAL after mark_invalid() ----------------------------- */

/* A runtime name as dockerd(8) --add-runtime takes it: what goes into HostConfig.Runtime and
 * the grade, so nothing that could break a JSON string or the grade's text. */
static bool engine_runtime_name_ok(const char *v)
{
        size_t n = strlen(v);

        if (n == 0 || n > 64 || !isalnum((unsigned char)v[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
                        return false;
        return true;
}

/* Plain decimal digits only, 1..max. */
static bool parse_positive(const char *v, unsigned long long max, unsigned long long *ret)
{
        unsigned long long n = 0;

        if (!*v)
                return false;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9')
                        return false;
                if (n > (ULLONG_MAX - 9) / 10)
                        return false;
                n = n * 10 + (unsigned)(*p - '0');
                if (n > max)
                        return false;
        }
        if (n == 0)
                return false;
        *ret = n;
        return true;
}

static bool parse_bool(const char *v, bool *ret)
{
        static const char *const yes[] = {"1", "true", "yes", "on"};
        static const char *const no[] = {"0", "false", "no", "off"};

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(v, yes[i]) == 0) {
                        *ret = true;
                        return true;
                }
                if (strcasecmp(v, no[i]) == 0) {
                        *ret = false;
                        return true;
                }
        }
        return false;
}

static int parse_word(const char *v, const char *const *words, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcasecmp(v, words[i]) == 0)
                        return (int)i;
        return -1;
}

static const char *const backend_words[] = {"auto", "native", "container", "naive", "gvisor"};
static const char *const runtime_words[] = {"auto", "docker", "podman"};
static const char *const image_source_words[] = {"registry", "debian"};
static const char *const log_level_words[] = {"error", "warning", "info", "debug"};
static const char *const trace_words[] = {"off", "timing"};

/* Expand '~' and normalise. Returns a new string or NULL with *@why set. */
static char *path_expand(const char *v, const char *home, bool *home_missing, const char **why)
{
        _cleanup_free_ char *full = NULL;
        char *out, *o;
        const char *p;

        if (v[0] == '~') {
                if (v[1] != '\0' && v[1] != '/') {
                        *why = "must be absolute or start with '~/' ('~user' is not supported)";
                        return NULL;
                }
                if (!home) {
                        *home_missing = true;
                        *why = "cannot expand '~': no home directory (HOME is unset and the "
                               "password database has none)";
                        return NULL;
                }
                full = xasprintf("%s%s", home, v + 1);
        } else
                full = xstrdup(v);

        if (full[0] != '/') {
                *why = "must be an absolute path or start with '~/'";
                return NULL;
        }
        /* Normalise: drop empty and '.' components, refuse '..'. */
        out = xmalloc(strlen(full) + 2);
        o = out;
        p = full;
        while (*p) {
                const char *start, *end;
                while (*p == '/')
                        p++;
                start = p;
                while (*p && *p != '/')
                        p++;
                end = p;
                if (end == start || (end - start == 1 && start[0] == '.'))
                        continue;
                if (end - start == 2 && start[0] == '.' && start[1] == '.') {
                        free(out);
                        *why = "must not contain '..' (write the folder's full path)";
                        return NULL;
                }
                *o++ = '/';
                memcpy(o, start, (size_t)(end - start));
                o += end - start;
        }
        *o = '\0';
        if (out[0] == '\0') {
                free(out);
                *why = "must not be the root folder '/' (use a folder of its own)";
                return NULL;
        }
        return out;
}

static bool image_ref_ok(const char *v)
{
        size_t n = strlen(v);

        if (n == 0 || n > 255)
                return false;
        for (const char *p = v; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("._/:@-", *p))
                        return false;
        return true;
}

/* Apply one value to its field. @v is trimmed and non-blank. */
static void apply(struct load_ctx *x, const struct setting *s, enum value_source src, const char *v)
{
        struct sbx_config *c = x->c;
        char *field = (char *)c + s->offset;
        unsigned long long n;
        bool b;
        int w;

        switch (s->kind) {
        case KIND_PATH: {
                const char *why = NULL;
                char *p = path_expand(v, x->home, &x->home_missing, &why);
                if (!p) {
                        mark_invalid(x, s, src, v, "%s", why);
                        return;
                }
                free(*(char **)field);
                *(char **)field = p;
                return;
        }
        case KIND_RAW:
                free(*(char **)field);
                *(char **)field = xstrdup(v);
                return;
        case KIND_BOOL:
                if (!parse_bool(v, &b)) {
                        mark_invalid(x, s, src, v,
                                     "must be on or off: 1/true/yes/on or 0/false/no/off");
                        return;
                }
                *(bool *)field = b;
                return;
        case KIND_COUNT:
                if (strcmp(v, "0") == 0) {
                        *(unsigned *)field = 0;
                        return;
                }
                /* fall through */
        case KIND_UINT:
        case KIND_SIZE:
                if (!parse_positive(v, s->max, &n)) {
                        mark_invalid(x, s, src, v, "must be %s, at most %llu", s->rule, s->max);
                        return;
                }
                if (s->kind == KIND_UINT || s->kind == KIND_COUNT)
                        *(unsigned *)field = (unsigned)n;
                else
                        *(size_t *)field = (size_t)n;
                return;
        case KIND_BACKEND:
                w = parse_word(v, backend_words, ELEMENTSOF(backend_words));
                if (w < 0) {
                        mark_invalid(x, s, src, v,
                                     "must be auto, gvisor, native, container or naive (naive: "
                                     "no isolation, development only)");
                        return;
                }
                c->backend = (enum sbx_backend_choice)w;
                return;
        case KIND_RUNTIME:
                w = parse_word(v, runtime_words, ELEMENTSOF(runtime_words));
                if (w < 0) {
                        mark_invalid(x, s, src, v, "must be auto, docker or podman");
                        return;
                }
                c->runtime = (enum sbx_runtime_choice)w;
                return;
        case KIND_IMAGE_SOURCE:
                w = parse_word(v, image_source_words, ELEMENTSOF(image_source_words));
                if (w < 0) {
                        mark_invalid(x, s, src, v, "must be registry or debian");
                        return;
                }
                c->image_source = (enum sbx_image_source)w;
                return;
        case KIND_LOG_LEVEL:
                w = parse_word(v, log_level_words, ELEMENTSOF(log_level_words));
                if (w < 0) {
                        mark_invalid(x, s, src, v, "must be error, warning, info or debug");
                        return;
                }
                c->log_level = w;
                return;
        case KIND_TRACE:
                w = parse_word(v, trace_words, ELEMENTSOF(trace_words));
                if (w < 0) {
                        mark_invalid(x, s, src, v,
                                     "must be off or timing (timing: one log line per sandbox "
                                     "setup phase, in microseconds)");
                        return;
                }
                c->trace_timing = w == 1;
                return;
        case KIND_IMAGE:
                if (!image_ref_ok(v)) {
                        mark_invalid(x, s, src, v,
                                     "must be an image reference (letters, digits and ._/:@- "
                                     "only, at most 255), pinned like name@sha256:<digest>");
                        return;
                }
                free(*(char **)field);
                *(char **)field = xstrdup(v);
                return;
        case KIND_RUN_AS: {
                _cleanup_free_ char *uid_s = NULL;
                const char *colon = strchr(v, ':');
                unsigned long long uid, gid;

                if (colon)
                        uid_s = xstrndup(v, (size_t)(colon - v));
                /* (uid_t)-1 and (gid_t)-1 mean "no change" to set*id(2), so they are refused. */
                if (!colon || !parse_positive(uid_s, UINT32_MAX - 1, &uid) ||
                    !parse_positive(colon + 1, UINT32_MAX - 1, &gid)) {
                        mark_invalid(x, s, src, v,
                                     "must be uid:gid, two numeric non-zero ids of an "
                                     "unprivileged user, e.g. 2000:2000 (0 is root, which code "
                                     "never runs as)");
                        return;
                }
                c->run_as_set = true;
                c->run_as_uid = (uid_t)uid;
                c->run_as_gid = (gid_t)gid;
                return;
        }
        }
}

/* --- the YAML file ----------------------------------------------------------------------- */

static const struct setting *setting_find(const char *key)
{
        for (size_t i = 0; i < ELEMENTSOF(settings); i++)
                if (strcmp(settings[i].key, key) == 0)
                        return &settings[i];
        return NULL;
}

static bool yaml_is_null(const yaml_node_t *n)
{
        const char *v = (const char *)n->data.scalar.value;

        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        return n->data.scalar.length == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
               strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static void yaml_documentp(yaml_document_t **d)
{
        if (*d)
                yaml_document_delete(*d);
}

static void yaml_parserp(yaml_parser_t **p)
{
        if (*p)
                yaml_parser_delete(*p);
}

/* libyaml's problem, where it noticed it, and where the construct it was reading began (an
 * unclosed '[' is noticed only at the end of the file). */
static void yaml_syntax_error(struct load_ctx *x, const yaml_parser_t *parser)
{
        char where[160] = "";

        if (parser->context)
                snprintf(where, sizeof(where), " (%s at line %zu, column %zu)", parser->context,
                         parser->context_mark.line + 1, parser->context_mark.column + 1);
        mark_invalid_text(x, "the config file",
                          "the config file '%s' is not valid YAML: %s at line %zu, column %zu%s; "
                          "fix the file (or remove it) and restart the server",
                          x->file, parser->problem ? parser->problem : "syntax error",
                          parser->problem_mark.line + 1, parser->problem_mark.column + 1, where);
}

/* Parse @text into x->entries. On any problem: mark invalid (naming the file, line, column)
 * and keep no entries, so only the environment and the defaults apply. */
static void parse_file(struct load_ctx *x, const char *text)
{
        yaml_parser_t parser_s;
        yaml_document_t doc_s;
        /* set once initialised, so the cleanup deletes only what was made */
        _cleanup_(yaml_parserp) yaml_parser_t *parser = NULL;
        _cleanup_(yaml_documentp) yaml_document_t *doc = NULL;
        yaml_node_t *root;
        const char *file = x->file;
        struct sbx_error lib_err = {0};

        if (lazy_yaml_load(&lib_err) < 0) {
                mark_invalid_text(x, "the config file", "cannot read the config file '%s': %s",
                                  file, lib_err.msg);
                return;
        }
        if (!yaml_parser_initialize(&parser_s)) {
                mark_invalid_text(x, "the config file",
                                  "cannot read the config file '%s': libyaml failed to start; "
                                  "restart the server",
                                  file);
                return;
        }
        parser = &parser_s;
        yaml_parser_set_input_string(parser, (const unsigned char *)text, strlen(text));
        if (!yaml_parser_load(parser, &doc_s)) {
                yaml_syntax_error(x, parser);
                return;
        }
        doc = &doc_s;
        root = yaml_document_get_root_node(doc);
        if (!root)
                return; /* an empty file */
        if (root->type == YAML_SCALAR_NODE && yaml_is_null(root))
                return; /* only comments, or '~' */
        if (root->type != YAML_MAPPING_NODE) {
                mark_invalid_text(x, "the config file",
                                  "the config file '%s' must be a mapping of settings such as "
                                  "'mem_mb: 512' (line %zu, column %zu); fix the file and restart "
                                  "the server",
                                  file, root->start_mark.line + 1, root->start_mark.column + 1);
                return;
        }
        /* One document only: a second one would be silently ignored otherwise. */
        {
                yaml_document_t next;
                if (!yaml_parser_load(parser, &next)) {
                        yaml_syntax_error(x, parser);
                        return;
                }
                bool more = yaml_document_get_root_node(&next) != NULL;
                size_t line = next.start_mark.line + 1;
                yaml_document_delete(&next);
                if (more) {
                        mark_invalid_text(x, "the config file",
                                          "the config file '%s' holds more than one YAML "
                                          "document (the second starts at line %zu); keep one "
                                          "mapping of settings and restart the server",
                                          file, line);
                        return;
                }
        }

        size_t n = (size_t)(root->data.mapping.pairs.top - root->data.mapping.pairs.start);
        struct file_entry *entries = xcalloc(n ? n : 1, sizeof(*entries));
        size_t k = 0;
        bool bad = false;

        for (yaml_node_pair_t *pair = root->data.mapping.pairs.start;
             pair < root->data.mapping.pairs.top && !bad; pair++) {
                yaml_node_t *key = yaml_document_get_node(doc, pair->key);
                yaml_node_t *val = yaml_document_get_node(doc, pair->value);
                char shown[200];

                if (!key || !val || key->type != YAML_SCALAR_NODE) {
                        mark_invalid_text(x, "the config file",
                                          "the config file '%s' has a key that is not plain "
                                          "text at line %zu, column %zu; keys are setting names "
                                          "such as mem_mb; fix the file and restart the server",
                                          file, key ? key->start_mark.line + 1 : 0,
                                          key ? key->start_mark.column + 1 : 0);
                        bad = true;
                        break;
                }
                const char *kname = (const char *)key->data.scalar.value;
                show_value(kname, shown, sizeof(shown));
                const struct setting *s = setting_find(kname);
                if (!s || strlen(kname) != key->data.scalar.length) {
                        _cleanup_free_ char *hint = NULL;
                        char lower[96];
                        size_t i;
                        const char *base = kname;

                        /* VESTIBULE_MEM_MB or MEM_MB: say which key was meant. */
                        for (i = 0; base[i] && i + 1 < sizeof(lower); i++)
                                lower[i] = (char)tolower((unsigned char)base[i]);
                        lower[i] = '\0';
                        base = strncmp(lower, "vestibule_", 10) == 0 ? lower + 10 : lower;
                        if (setting_find(base))
                                hint = xasprintf(" (did you mean '%s'?)", base);
                        mark_invalid_text(x, "the config file",
                                          "unknown setting '%s'%s in the config file '%s' at "
                                          "line %zu: keys are the VESTIBULE_* names in lower case "
                                          "without the prefix, such as mem_mb; fix the file and "
                                          "restart the server",
                                          shown, hint ? hint : "", file, key->start_mark.line + 1);
                        bad = true;
                        break;
                }
                if (val->type != YAML_SCALAR_NODE) {
                        mark_invalid_text(x, "the config file",
                                          "setting '%s' in the config file '%s' at line %zu must "
                                          "be a single value, not a list or mapping; fix the file "
                                          "and restart the server",
                                          s->key, file, val->start_mark.line + 1);
                        bad = true;
                        break;
                }
                for (size_t j = 0; j < k; j++)
                        if (strcmp(entries[j].key, s->key) == 0) {
                                mark_invalid_text(x, "the config file",
                                                  "setting '%s' appears twice in the config file "
                                                  "'%s' (lines %zu and %zu); keep one and restart "
                                                  "the server",
                                                  s->key, file, entries[j].line,
                                                  key->start_mark.line + 1);
                                bad = true;
                                break;
                        }
                if (bad)
                        break;
                if (strlen((const char *)val->data.scalar.value) != val->data.scalar.length) {
                        mark_invalid_text(x, "the config file",
                                          "setting '%s' in the config file '%s' at line %zu holds "
                                          "a NUL character; fix the file and restart the server",
                                          s->key, file, val->start_mark.line + 1);
                        bad = true;
                        break;
                }
                entries[k].key = xstrdup(s->key);
                entries[k].value =
                    yaml_is_null(val) ? NULL : xstrdup((const char *)val->data.scalar.value);
                entries[k].line = key->start_mark.line + 1;
                k++;
        }
        if (bad) {
                for (size_t j = 0; j < k; j++) {
                        free(entries[j].key);
                        free(entries[j].value);
                }
                free(entries);
                return;
        }
        x->entries = entries;
        x->n_entries = k;
}

static const struct file_entry *file_value(const struct load_ctx *x, const char *key)
{
        for (size_t i = 0; i < x->n_entries; i++)
                if (strcmp(x->entries[i].key, key) == 0)
                        return &x->entries[i];
        return NULL;
}

/* --- cross checks ------------------------------------------------------------------------ */

static bool path_inside(const char *inner, const char *outer)
{
        size_t n = strlen(outer);

        return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static void check_overlap(struct load_ctx *x, const char *a_var, const char *a, const char *b_var,
                          const char *b)
{
        if (!a || !b)
                return;
        if (path_inside(a, b) || path_inside(b, a))
                mark_invalid_text(x, a_var,
                                  "invalid settings %s='%s' and %s='%s': these folders must not "
                                  "lie inside one another (sandboxed code writes to the "
                                  "workspace); give each its own folder in the MCP client's env "
                                  "for vestibule (or the config file) and restart the server",
                                  a_var, a, b_var, b);
}

/* @dir (a workspace) is @home or one of its ancestors, compared as written and, when both
 * exist, through realpath(3) (a home reached by a symlink). */
static bool holds_home(const char *dir, const char *home)
{
        _cleanup_free_ char *h = NULL, *rd = NULL, *rh = NULL;
        bool missing = false;
        const char *why = NULL;

        if (!dir || !home || home[0] != '/')
                return false;
        h = path_expand(home, NULL, &missing, &why);
        if (!h) /* HOME is '/' itself (or holds '..'): '/' is refused on its own already */
                return false;
        if (path_inside(h, dir))
                return true;
        rd = realpath(dir, NULL);
        rh = realpath(h, NULL);
        return rd && rh && (strcmp(rd, "/") == 0 || path_inside(rh, rd));
}

/* Sandboxed code writes to the workspace; in the home folder (or above it) that means the
 * user's dotfiles (~/.bashrc, ~/.profile, ~/.ssh), which run later on the host, outside any
 * sandbox. */
static void check_not_home(struct load_ctx *x)
{
        const char *ws = x->c->workspace_dir;
        struct passwd pw, *res = NULL;
        char buf[4096];
        const char *home = NULL;

        if (holds_home(ws, x->home))
                home = x->home;
        else if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_dir &&
                 holds_home(ws, res->pw_dir))
                home = res->pw_dir;
        if (home)
                mark_invalid_text(x, "VESTIBULE_WORKSPACE",
                                  "invalid setting VESTIBULE_WORKSPACE='%s': it is your home "
                                  "folder '%s' or holds it, so sandboxed code could rewrite "
                                  "your dotfiles (~/.bashrc, ~/.ssh), which run later on the "
                                  "host; give the workspace a folder of its own, such as "
                                  "'~/.vestibule/workspace' or '~/projects/x', in the MCP "
                                  "client's env for vestibule (or the config file) and restart "
                                  "the server",
                                  ws, home);
}

static void cross_checks(struct load_ctx *x)
{
        struct sbx_config *c = x->c;

        check_not_home(x);
        if (c->container_runtime && !engine_runtime_name_ok(c->container_runtime))
                mark_invalid_text(x, "VESTIBULE_CONTAINER_RUNTIME",
                                  "invalid setting VESTIBULE_CONTAINER_RUNTIME='%.80s': must be "
                                  "the name of an OCI runtime registered with the engine "
                                  "(letters, digits, '.', '_', '-'; at most 64), e.g. runsc; fix "
                                  "it in the MCP client's env for vestibule (or the config file) "
                                  "and restart the server",
                                  c->container_runtime);

        if (c->default_timeout_s > c->max_timeout_s)
                mark_invalid_text(x, "VESTIBULE_DEFAULT_TIMEOUT_S",
                                  "invalid setting VESTIBULE_DEFAULT_TIMEOUT_S=%u: it is above "
                                  "VESTIBULE_MAX_TIMEOUT_S=%u; lower it or raise the ceiling in "
                                  "the MCP client's env for vestibule (or the config file) and "
                                  "restart the server",
                                  c->default_timeout_s, c->max_timeout_s);
        check_overlap(x, "VESTIBULE_WORKSPACE", c->workspace_dir, "VESTIBULE_ROOTFS_DIR",
                      c->rootfs_dir);
        check_overlap(x, "VESTIBULE_AUDIT_DIR", c->audit_dir, "VESTIBULE_WORKSPACE",
                      c->workspace_dir);
        check_overlap(x, "VESTIBULE_AUDIT_DIR", c->audit_dir, "VESTIBULE_ROOTFS_DIR",
                      c->rootfs_dir);
}

/* --- loading ----------------------------------------------------------------------------- */

static char *home_dir(const char *(*getenv_fn)(const char *name))
{
        const char *h = getenv_fn("HOME");
        _cleanup_free_ char *t = trimmed(h);
        struct passwd pw, *res = NULL;
        char buf[4096];

        if (t && t[0] == '/')
                return TAKE_PTR(t);
        if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_dir &&
            res->pw_dir[0] == '/')
                return xstrdup(res->pw_dir);
        return NULL;
}

/* Where the YAML file is: $VESTIBULE_CONFIG, else $XDG_CONFIG_HOME (absolute only, as the XDG
 * spec says) or ~/.config, + /vestibule/config.yaml. *@ret_explicit: named by VESTIBULE_CONFIG
 * (then a missing file is an error). NULL with x->c->invalid set when unusable. */
static char *config_path(struct load_ctx *x, bool *ret_explicit)
{
        _cleanup_free_ char *v = trimmed(x->getenv_fn("VESTIBULE_CONFIG"));
        _cleanup_free_ char *xdg = trimmed(x->getenv_fn("XDG_CONFIG_HOME"));

        *ret_explicit = false;
        if (v) {
                static const struct setting cfg = {"config", KIND_PATH, NULL, 0, 0, NULL};
                const char *why = NULL;
                char *p = path_expand(v, x->home, &x->home_missing, &why);
                if (!p)
                        mark_invalid(x, &cfg, SRC_ENV, v, "%s", why);
                *ret_explicit = true;
                return p;
        }
        if (xdg && xdg[0] == '/')
                return xasprintf("%s/vestibule/config.yaml", xdg);
        if (!x->home)
                return NULL;
        return xasprintf("%s/.config/vestibule/config.yaml", x->home);
}

/* Read the file at @path; NULL when it does not exist (and is not required). */
static char *read_config_file(struct load_ctx *x, const char *path, bool required)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                if (errno == ENOENT && !required)
                        return NULL;
                mark_invalid_text(x, "VESTIBULE_CONFIG",
                                  "cannot read the config file '%s': %s; %s and restart the "
                                  "server",
                                  path, strerror(errno),
                                  required ? "fix VESTIBULE_CONFIG in the MCP client's env for "
                                             "vestibule (or create the file)"
                                           : "fix its permissions (or remove it)");
                return NULL;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                mark_invalid_text(x, "VESTIBULE_CONFIG",
                                  "the config file '%s' is not a regular file; point "
                                  "VESTIBULE_CONFIG at a YAML file and restart the server",
                                  path);
                return NULL;
        }
        /* As ssh does for its config: a file others may write could switch isolation off
         * (backend: naive), so it is not trusted. */
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != geteuid() && st.st_uid != 0)) {
                mark_invalid_text(x, "VESTIBULE_CONFIG",
                                  "the config file '%s' is %s (mode %04o, owner uid %u), so "
                                  "another user could change settings such as the backend; make "
                                  "it yours and run chmod go-w on it, then restart the server",
                                  path,
                                  (st.st_mode & (S_IWGRP | S_IWOTH)) ? "writable by other users"
                                                                     : "owned by another user",
                                  (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
                return NULL;
        }
        buf = xmalloc((size_t)CONFIG_FILE_MAX_BYTES + 1);
        for (;;) {
                ssize_t r = read(fd, buf + len, CONFIG_FILE_MAX_BYTES + 1 - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        mark_invalid_text(x, "VESTIBULE_CONFIG",
                                          "cannot read the config file '%s': %s; fix it and "
                                          "restart the server",
                                          path, strerror(errno));
                        return NULL;
                }
                if (r == 0)
                        break;
                len += (size_t)r;
                if (len > CONFIG_FILE_MAX_BYTES) {
                        mark_invalid_text(x, "VESTIBULE_CONFIG",
                                          "the config file '%s' is larger than 1 MiB; it should "
                                          "hold a few settings only; fix it and restart the server",
                                          path);
                        return NULL;
                }
        }
        buf[len] = '\0';
        if (strlen(buf) != len) {
                mark_invalid_text(x, "VESTIBULE_CONFIG",
                                  "the config file '%s' holds a NUL byte and is not a YAML text "
                                  "file; fix it and restart the server",
                                  path);
                return NULL;
        }
        return TAKE_PTR(buf);
}

/* @yaml_text: NULL = read the file named by the environment; else use this text as that
 * file's content (tests). */
static int load(const char *(*getenv_fn)(const char *name), bool read_file, const char *yaml_text,
                struct sbx_config **ret, struct sbx_error *err)
{
        _cleanup_free_ char *home = NULL, *path = NULL, *text = NULL;
        struct sbx_config *c = xcalloc(1, sizeof(*c));
        struct load_ctx x = {.getenv_fn = getenv_fn, .c = c};
        bool explicit_file = false, user_python = false, user_node = false;

        home = home_dir(getenv_fn);
        x.home = home;

        path = config_path(&x, &explicit_file);
        if (read_file && path)
                text = read_config_file(&x, path, explicit_file);
        else if (yaml_text)
                text = xstrdup(yaml_text);
        if (text && path) {
                x.file = path;
                c->config_file = xstrdup(path);
                parse_file(&x, text);
        } else if (text) {
                x.file = "(config text)";
                parse_file(&x, text);
        }

        for (size_t i = 0; i < ELEMENTSOF(settings); i++) {
                const struct setting *s = &settings[i];
                char var[64];
                _cleanup_free_ char *ev = NULL, *fv = NULL, *dv = NULL;
                const struct file_entry *fe = file_value(&x, s->key);

                var_name(s->key, var, sizeof(var));
                if (s->offset == F(image_python) || s->offset == F(image_node)) {
                        bool *user = s->offset == F(image_python) ? &user_python : &user_node;
                        _cleanup_free_ char *uv = trimmed(getenv_fn(var));
                        _cleanup_free_ char *uf = fe ? trimmed(fe->value) : NULL;
                        *user = uv || uf;
                }
                /* Defaults first, so a bad user value leaves the default in place. */
                dv = trimmed(s->def);
                if (dv)
                        apply(&x, s, SRC_DEFAULT, dv);
                ev = trimmed(getenv_fn(var));
                if (ev) {
                        apply(&x, s, SRC_ENV, ev);
                        continue;
                }
                fv = fe ? trimmed(fe->value) : NULL;
                if (fv)
                        apply(&x, s, SRC_FILE, fv);
        }

        /* The image source picks the default images: the Debian-built ones are imported under
         * their own names (images/pins), and the registry digests would not be there. A name
         * the user chose explicitly always wins. */
        if (c->image_source == SBX_IMAGE_SOURCE_DEBIAN) {
                if (!user_python) {
                        free(c->image_python);
                        c->image_python = xstrdup(SBX_DEBIAN_IMAGE_PYTHON);
                }
                if (!user_node) {
                        free(c->image_node);
                        c->image_node = xstrdup(SBX_DEBIAN_IMAGE_NODE);
                }
        }

        for (size_t i = 0; i < x.n_entries; i++) {
                free(x.entries[i].key);
                free(x.entries[i].value);
        }
        free(x.entries);

        /* A default path needs a home; without one nothing sensible can be chosen. */
        if (!c->workspace_dir || !c->rootfs_dir || !c->audit_dir) {
                config_free(c);
                return sbx_fail(err, ENOENT,
                                "cannot find your home directory for the default folders: set "
                                "HOME, or set VESTIBULE_WORKSPACE, VESTIBULE_ROOTFS_DIR and "
                                "VESTIBULE_AUDIT_DIR to absolute paths");
        }
        cross_checks(&x);
        {
                struct sbx_error e = {0};
                if (config_egress_parse(c->egress.allow_raw, c->egress.ports_raw, c->egress.pin_raw,
                                        &c->egress, &e) < 0)
                        mark_invalid_text(&x, "VESTIBULE_EGRESS_*",
                                          "invalid setting %s; fix it in the MCP client's env for "
                                          "vestibule (or the config file) and restart the server",
                                          e.msg);
        }

        if (c->invalid && x.also[0]) {
                size_t n = strlen(c->invalid_msg);
                snprintf(c->invalid_msg + n, sizeof(c->invalid_msg) - n, " (also invalid: %s)",
                         x.also);
        }
        *ret = c;
        return 0;
}

static const char *process_getenv(const char *name)
{
        return getenv(name);
}

bool config_is_setting(const char *var)
{
        char buf[64];

        if (var && strcmp(var, "VESTIBULE_CONFIG") == 0)
                return true;
        for (size_t i = 0; var && i < ELEMENTSOF(settings); i++) {
                var_name(settings[i].key, buf, sizeof(buf));
                if (strcmp(buf, var) == 0)
                        return true;
        }
        return false;
}

const char *config_process_getenv(const char *name)
{
        return secure_getenv(name);
}

static char *env_copy(const char *(*getenv_fn)(const char *name), const char *name)
{
        const char *v = getenv_fn ? getenv_fn(name) : NULL;
        return v && *v ? xstrdup(v) : NULL;
}

void config_engine_env_fill(const char *(*getenv_fn)(const char *name), struct sbx_engine_env *ret)
{
        ret->docker_host = env_copy(getenv_fn, "DOCKER_HOST");
        ret->docker_context = env_copy(getenv_fn, "DOCKER_CONTEXT");
        ret->docker_config = env_copy(getenv_fn, "DOCKER_CONFIG");
        ret->docker_tls_verify = env_copy(getenv_fn, "DOCKER_TLS_VERIFY");
        ret->docker_cert_path = env_copy(getenv_fn, "DOCKER_CERT_PATH");
        ret->container_host = env_copy(getenv_fn, "CONTAINER_HOST");
        ret->home = getenv_fn ? home_dir(getenv_fn) : NULL;
        ret->xdg_runtime_dir = env_copy(getenv_fn, "XDG_RUNTIME_DIR");
        ret->user_bus_address = env_copy(getenv_fn, "DBUS_SESSION_BUS_ADDRESS");
}

void config_engine_env_done(struct sbx_engine_env *e)
{
        if (!e)
                return;
        free(e->docker_host);
        free(e->docker_context);
        free(e->docker_config);
        free(e->docker_tls_verify);
        free(e->docker_cert_path);
        free(e->container_host);
        free(e->home);
        free(e->xdg_runtime_dir);
        free(e->user_bus_address);
        memset(e, 0, sizeof(*e));
}

bool config_in_container(const char *root, char *ret_marker, size_t marker_size)
{
        static const char *const markers[] = {SBX_OCI_IMAGE_MARKER};
        const char *base = root && strcmp(root, "/") != 0 ? root : "";
        char path[PATH_MAX];
        struct stat st;

        if (ret_marker && marker_size)
                ret_marker[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(markers); i++) {
                snprintf(path, sizeof(path), "%s%s", base, markers[i]);
                if (lstat(path, &st) == 0) {
                        if (ret_marker && marker_size)
                                snprintf(ret_marker, marker_size, "%s", markers[i]);
                        return true;
                }
        }
        return false;
}

int config_load(struct sbx_config **ret, struct sbx_error *err)
{
        int r = load(process_getenv, true, NULL, ret, err);
        /* secure_getenv, as the engine read these before they moved here */
        if (r == 0) {
                config_engine_env_fill(config_process_getenv, &(*ret)->engine_env);
                (*ret)->in_container = config_in_container("/", (*ret)->in_container_marker,
                                                           sizeof((*ret)->in_container_marker));
        }
        return r;
}

int config_load_from(const char *(*getenv_fn)(const char *name), const char *yaml_text,
                     struct sbx_config **ret, struct sbx_error *err)
{
        int r = load(getenv_fn, false, yaml_text, ret, err);
        if (r == 0)
                config_engine_env_fill(getenv_fn, &(*ret)->engine_env);
        return r;
}

struct sbx_config *config_free(struct sbx_config *c)
{
        if (!c)
                return NULL;
        config_engine_env_done(&c->engine_env);
        free(c->workspace_dir);
        free(c->rootfs_dir);
        free(c->audit_dir);
        free(c->config_file);
        free(c->image_python);
        free(c->image_node);
        free(c->container_runtime);
        config_egress_done(&c->egress);
        free(c);
        return NULL;
}

const char *config_backend_name(enum sbx_backend_choice b)
{
        if ((size_t)b < ELEMENTSOF(backend_words))
                return backend_words[b];
        return "unknown";
}

const char *config_runtime_name(enum sbx_runtime_choice r)
{
        if ((size_t)r < ELEMENTSOF(runtime_words))
                return runtime_words[r];
        return "unknown";
}
