/* run_guard.c - the guarded parts of an agent's own files recorded, journaled and put back
 * (run_guard.h). The journal folder holds "index", one line a path
 * ("N KIND STATE MODE PATH KEYS", tab-separated; KIND json, toml or dir; STATE absent, file,
 * link or dir), and for each "file" its bytes as N, for each "link" its target as N. */
#include "cli/run_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/jsontext.h"
#include "common/owner.h"
#include "common/xalloc.h"
#include "config/secrets.h"

#define GUARD_FILE_MAX (64u << 20) /* bytes of one guarded file the journal keeps */

enum gkind { G_JSON, G_TOML, G_DIR };
enum gstate { G_ABSENT, G_FILE, G_LINK, G_PRESENT };
static const char *const kind_names[] = {"json", "toml", "dir"};
static const char *const state_names[] = {"absent", "file", "link", "dir"};

/* One guarded path as recorded. */
struct gentry {
        char *path, *keys; /* absolute; "K1,K2" ("" for a readonly path) */
        enum gkind kind;
        enum gstate state;
        unsigned mode; /* the file's permission bits (0600 when absent) */
        char *orig;    /* G_FILE: its bytes, NUL-ended; G_LINK: the target; else NULL */
        size_t orig_len;
};

static void gentries_free(struct gentry *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].path);
                free(v[i].keys);
                free(v[i].orig);
        }
        free(v);
}

/* The folder of the journals, made (0700) when @make. New string, or NULL (no usable home). */
static char *journal_root(bool make)
{
        const char *x = config_host_var("XDG_STATE_HOME"), *h = config_host_var("HOME");
        char *root;

        if (x && x[0] == '/')
                root = xasprintf("%s/vestibule/agent-guard", x);
        else if (h && h[0] == '/')
                root = xasprintf("%s/.local/state/vestibule/agent-guard", h);
        else
                return NULL;
        for (char *s = root + 1; make; s++) {
                char *e = strchr(s, '/');
                if (e)
                        *e = '\0';
                int r = mkdir(root, 0700) < 0 && errno != EEXIST ? -1 : 0;
                if (e)
                        *e = '/';
                if (r < 0) {
                        free(root);
                        return NULL;
                }
                if (!e)
                        break;
                s = e;
        }
        return root;
}

/* A journal name "PID-STARTTIME" that names a live process. */
static bool journal_alive(const char *name)
{
        char *end;
        long pid = strtol(name, &end, 10);

        if (pid <= 0 || *end != '-')
                return false;
        unsigned long long t = sbx_proc_start_time((pid_t)pid);
        return t != 0 && t == strtoull(end + 1, NULL, 10); /* 0: gone (or no /proc) */
}

/* Read @path (no link followed) whole into @ret (NUL-ended) and its mode into @ret_mode.
 * 0, or a negative errno (-ENOENT absent, -ELOOP a symlink, -EFBIG over GUARD_FILE_MAX). */
static int read_whole(const char *path, char **ret, size_t *ret_len, unsigned *ret_mode)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct sbx_buf b = {.max = GUARD_FILE_MAX};
        struct stat st;
        int r;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        r = sbx_buf_read_fd(&b, fd);
        if (r < 0) {
                sbx_buf_done(&b);
                return r;
        }
        if (ret_mode)
                *ret_mode = st.st_mode & 07777;
        *ret = sbx_buf_steal(&b, ret_len);
        return 0;
}

/* Write @len bytes of @data to @path with @mode: a new file beside it, then rename(2). */
static int write_atomic(const char *path, const char *data, size_t len, unsigned mode)
{
        _cleanup_free_ char *tmp = xasprintf("%s.vestibule-XXXXXX", path);
        int fd = mkostemp(tmp, O_CLOEXEC), r = 0;

        if (fd < 0)
                return -errno;
        for (size_t at = 0; at < len && r == 0;) {
                ssize_t w = write(fd, data + at, len - at);
                if (w < 0 && errno != EINTR)
                        r = -errno;
                else if (w > 0)
                        at += (size_t)w;
        }
        if (r == 0 && (fchmod(fd, mode & 07777) < 0 || fsync(fd) < 0))
                r = -errno;
        close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

/* "PATH.vestibule-planted-TIME" ("-N" added when that is taken): where the agent's version is
 * kept. New string. */
static char *aside_name(const char *path)
{
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        struct stat st;
        char *name;

        gmtime_r(&now, &tm);
        strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
        name = xasprintf("%s.vestibule-planted-%s", path, ts);
        for (unsigned i = 2; lstat(name, &st) == 0; i++) {
                free(name);
                name = xasprintf("%s.vestibule-planted-%s-%u", path, ts, i);
        }
        return name;
}

/* Record @path as it is now into @e (kind @kind, keys @keys). 0 or a negative errno. */
static int record_one(const char *path, enum gkind kind, const char *keys, struct gentry *e)
{
        struct stat st;
        char target[PATH_MAX];
        int r;

        *e = (struct gentry){
            .path = xstrdup(path), .keys = xstrdup(keys), .kind = kind, .mode = 0600};
        if (lstat(path, &st) < 0) {
                if (errno != ENOENT)
                        return -errno;
                e->state = G_ABSENT;
                return 0;
        }
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                e->state = G_LINK;
                e->orig = xstrndup(target, (size_t)n);
                e->orig_len = (size_t)n;
                return 0;
        }
        if (kind == G_DIR) {
                e->state = G_PRESENT;
                return 0;
        }
        e->state = G_FILE;
        r = read_whole(path, &e->orig, &e->orig_len, &e->mode);
        return r;
}

/* Write @v (@n) as a journal folder under @root, renamed to "PID-STARTTIME" once whole.
 * The new folder's path into @ret. 0 or a negative errno. */
static int journal_write(const char *root, const struct gentry *v, size_t n, char **ret)
{
        _cleanup_free_ char *tmp = xasprintf("%s/.tmp-%ld-XXXXXX", root, (long)getpid());
        _cleanup_free_ char *final = NULL;
        struct sbx_buf idx = {0};
        int r = 0;

        if (!mkdtemp(tmp))
                return -errno;
        for (size_t i = 0; i < n && r == 0; i++) {
                sbx_buf_printf(&idx, "%zu\t%s\t%s\t%o\t%s\t%s\n", i, kind_names[v[i].kind],
                               state_names[v[i].state], v[i].mode, v[i].path, v[i].keys);
                if (v[i].orig) {
                        _cleanup_free_ char *f = xasprintf("%s/%zu", tmp, i);
                        r = write_atomic(f, v[i].orig, v[i].orig_len, 0600);
                }
        }
        if (r == 0) {
                _cleanup_free_ char *f = xasprintf("%s/index", tmp);
                r = write_atomic(f, idx.data ? idx.data : "", idx.len, 0600);
        }
        sbx_buf_done(&idx);
        final = xasprintf("%s/%ld-%llu", root, (long)getpid(), sbx_proc_start_time(getpid()));
        if (r == 0 && rename(tmp, final) < 0)
                r = -errno;
        if (r < 0) {
                for (size_t i = 0; i <= n; i++) {
                        _cleanup_free_ char *f =
                            i < n ? xasprintf("%s/%zu", tmp, i) : xasprintf("%s/index", tmp);
                        unlink(f);
                }
                rmdir(tmp);
                return r;
        }
        *ret = TAKE_PTR(final);
        return 0;
}

/* Read the journal folder @dir into @ret (@ret_n entries). 0 or a negative errno. */
static int journal_read(const char *dir, struct gentry **ret, size_t *ret_n)
{
        _cleanup_free_ char *ip = xasprintf("%s/index", dir);
        _cleanup_free_ char *text = NULL;
        struct gentry *v = NULL;
        size_t n = 0, len = 0;
        int r = read_whole(ip, &text, &len, NULL);

        if (r < 0)
                return r;
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                char *f[6];
                size_t k = 0;
                nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                for (char *s = line; s && k < 6; k++) {
                        f[k] = s;
                        s = strchr(s, '\t');
                        if (s)
                                *s++ = '\0';
                }
                if (k < 6) {
                        gentries_free(v, n);
                        return -EINVAL;
                }
                v = xrealloc(v, (n + 1) * sizeof(*v));
                struct gentry *e = &v[n++];
                *e = (struct gentry){.path = xstrdup(f[4]),
                                     .keys = xstrdup(f[5]),
                                     .mode = (unsigned)strtoul(f[3], NULL, 8)};
                e->kind = f[1][0] == 'j' ? G_JSON : f[1][0] == 't' ? G_TOML : G_DIR;
                e->state = f[2][0] == 'a'   ? G_ABSENT
                           : f[2][0] == 'f' ? G_FILE
                           : f[2][0] == 'l' ? G_LINK
                                            : G_PRESENT;
                if (e->state == G_FILE || e->state == G_LINK) {
                        _cleanup_free_ char *of = xasprintf("%s/%s", dir, f[0]);
                        r = read_whole(of, &e->orig, &e->orig_len, NULL);
                        if (r < 0) {
                                gentries_free(v, n);
                                return r;
                        }
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Remove the journal folder @dir (its files, then itself). */
static void journal_remove(const char *dir)
{
        _cleanup_(strv_freep) char **names = NULL;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd >= 0 && sbx_dir_names(fd, NULL, &names) >= 0)
                for (size_t i = 0; names[i]; i++)
                        (void)unlinkat(fd, names[i], 0);
        (void)rmdir(dir);
}

/* A value that runs nothing however it is read: absent, null, false, 0, "", [] or {}. An agent
 * writes these when it first meets a project (Claude Code: "mcpServers": {}), not a plant. */
static bool inert(struct json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_null:
                return true;
        case json_type_boolean:
        case json_type_int:
        case json_type_double:
                return !json_object_get_boolean(v);
        case json_type_string:
                return json_object_get_string_len(v) == 0;
        case json_type_array:
                return json_object_array_length(v) == 0;
        case json_type_object:
                return json_object_object_length(v) == 0;
        }
        return false;
}

/* One member @k of @cur (an object) on a KEY path whose last part it is: put back to @ov (the
 * original, NULL = absent) when the agent made it something that runs (not inert) and other
 * than it was. Said into @said as "@prefix@k". Return the changes (0 or 1). */
static int fix_member(struct json_object *cur, struct json_object *ov, const char *k,
                      const char *prefix, struct sbx_buf *said)
{
        struct json_object *cv = NULL;

        json_object_object_get_ex(cur, k, &cv);
        if (inert(cv) || (ov && json_object_equal(ov, cv)))
                return 0;
        if (ov) {
                struct json_object *copy = NULL;
                if (json_object_deep_copy(ov, &copy, NULL) < 0)
                        return 0;
                json_object_object_add(cur, k, copy);
        } else {
                json_object_object_del(cur, k);
        }
        sbx_buf_printf(said, "%s%s%s", said->len ? ", " : "", prefix, k);
        return 1;
}

/* Put back the KEY path @segs (@nseg parts, "*" any member) of @cur (an object) to @orig's (an
 * object, or NULL when the file was not there). Return the changes made. */
static int fix_path(struct json_object *orig, struct json_object *cur, char **segs, size_t nseg,
                    const char *prefix, struct sbx_buf *said)
{
        _cleanup_(strv_freep) char **members = NULL;
        size_t n = 0;
        int changes = 0;

        if (strcmp(segs[0], "*") != 0) {
                members = xcalloc(2, sizeof(*members));
                members[n++] = xstrdup(segs[0]);
        } else {
                struct json_object *sides[] = {orig, cur};
                members = xcalloc(1, sizeof(*members));
                for (size_t s = 0; s < 2; s++) {
                        if (!sides[s])
                                continue;
                        json_object_object_foreach(sides[s], key, val)
                        {
                                (void)val;
                                members = xrealloc(members, (n + 2) * sizeof(*members));
                                members[n++] = xstrdup(key);
                                members[n] = NULL;
                        }
                }
        }
        for (size_t i = 0; i < n; i++) {
                struct json_object *ov = NULL, *cv = NULL;
                if (orig)
                        json_object_object_get_ex(orig, members[i], &ov);
                if (nseg == 1) {
                        changes += fix_member(cur, ov, members[i], prefix, said);
                        continue;
                }
                if (!json_object_object_get_ex(cur, members[i], &cv) ||
                    !json_object_is_type(cv, json_type_object))
                        continue; /* nothing below it the agent reads */
                _cleanup_free_ char *sub = xasprintf("%s%s.", prefix, members[i]);
                changes += fix_path(ov && json_object_is_type(ov, json_type_object) ? ov : NULL, cv,
                                    segs + 1, nseg - 1, sub, said);
        }
        return changes;
}

/* @keys ("K1,K2", each '.'-separated) applied to @cur with fix_path(). The changes made. */
static int fix_keys(struct json_object *orig, struct json_object *cur, const char *keys,
                    struct sbx_buf *said)
{
        _cleanup_free_ char *copy = xstrdup(keys);
        int changes = 0;

        for (char *k = strtok(copy, ","); k; k = strtok(NULL, ",")) {
                char *segs[16];
                size_t n = 0;
                for (char *s = k, *e; s && n < ELEMENTSOF(segs); s = e ? e + 1 : NULL) {
                        e = strchr(s, '.');
                        if (e)
                                *e = '\0';
                        segs[n++] = s;
                }
                changes += fix_path(orig, cur, segs, n, "", said);
        }
        return changes;
}

/* The agent's version of @e->path moved aside and the original put back whole (or none, when
 * there was none). @why is said. 0, or a negative errno (said). */
static int restore_whole(const struct gentry *e, const char *why, struct sbx_buf *said)
{
        _cleanup_free_ char *aside = aside_name(e->path);
        struct stat st;
        int r = 0;

        if (lstat(e->path, &st) == 0 && rename(e->path, aside) < 0)
                r = -errno;
        if (r == 0 && e->state == G_FILE)
                r = write_atomic(e->path, e->orig, e->orig_len, e->mode);
        else if (r == 0 && e->state == G_LINK && symlink(e->orig, e->path) < 0)
                r = -errno;
        if (r < 0) {
                fprintf(stderr,
                        "vestibule-mcp run: --agent: %s %s, and putting it back failed: %s; "
                        "the journal is kept for the next run\n",
                        e->path, why, strerror(-r));
                return r;
        }
        sbx_buf_printf(said, "%s %s: put back whole%s%s", e->path, why,
                       e->state == G_ABSENT ? " (it was not there)" : "",
                       lstat(aside, &st) == 0 ? ", the agent's version kept as " : "");
        if (lstat(aside, &st) == 0)
                sbx_buf_puts(said, aside);
        return 0;
}

/* @key (@n bytes: a TOML key or table name, "a.\"b\".c") names one of @keys in some part.
 * 1 yes, 0 no, -1 when it cannot tell (an escape in a quoted part). toml.io/en/v1.0.0 "Keys". */
static int toml_key_hit(const char *key, size_t n, const char *keys)
{
        size_t i = 0;

        while (i < n) {
                char part[256];
                size_t m = 0;
                while (i < n && (key[i] == ' ' || key[i] == '\t'))
                        i++;
                char q = '\0';
                if (i < n && (key[i] == '"' || key[i] == '\''))
                        q = key[i++];
                while (i < n && (q ? key[i] != q : key[i] != '.' && key[i] != ' ')) {
                        if (key[i] == '\\' || m + 1 >= sizeof(part))
                                return -1;
                        part[m++] = key[i++];
                }
                if (q && i++ >= n)
                        return -1; /* no closing quote */
                part[m] = '\0';
                while (i < n && (key[i] == ' ' || key[i] == '\t'))
                        i++;
                if (i < n && key[i++] != '.')
                        return -1;
                for (const char *k = keys; *k;) {
                        size_t kl = strcspn(k, ",");
                        if (kl == m && strncmp(k, part, m) == 0)
                                return 1;
                        k += kl + (k[kl] == ',');
                }
        }
        return 0;
}

/* Scan @s[0..n) of a TOML line outside strings: the bracket depth change into @depth, where a
 * '=' first is into @eq (n when none). -1 when a string does not end on the line. */
static int toml_scan(const char *s, size_t n, int *depth, size_t *eq)
{
        *eq = n;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '#')
                        break;
                if (s[i] == '"' || s[i] == '\'') {
                        char q = s[i++];
                        while (i < n && s[i] != q)
                                i += q == '"' && s[i] == '\\' ? 2 : 1;
                        if (i >= n)
                                return -1;
                        continue;
                }
                if (s[i] == '=' && *eq == n)
                        *eq = i;
                *depth += s[i] == '[' || s[i] == '{' ? 1 : s[i] == ']' || s[i] == '}' ? -1 : 0;
        }
        return 0;
}

/* The lines of the TOML @text that hold @keys (a table of that name or below it, a key whose
 * name has one as a part, and the lines of a value they begin) into @out, in order.
 * 0, or -1 when the line scanner cannot tell (a multi-line string, an escape in a key): the
 * caller then takes any change as a change of them. */
int run_guard_toml_guarded(const char *text, const char *keys, struct sbx_buf *out)
{
        bool table = false, cont = false;
        int depth = 0;

        if (strstr(text, "\"\"\"") || strstr(text, "'''"))
                return -1;
        for (const char *l = text; *l;) {
                size_t n = strcspn(l, "\n"), eq, i = strspn(l, " \t\r");
                const char *next = l + n + (l[n] == '\n');
                int hit;
                if (depth > 0) {
                        if (toml_scan(l, n, &depth, &eq) < 0)
                                return -1;
                        if (cont)
                                sbx_buf_printf(out, "%.*s\n", (int)n, l);
                } else if (i < n && l[i] == '[') {
                        size_t a = i + 1 + (l[i + 1] == '['), b = a;
                        while (b < n && l[b] != ']')
                                b++;
                        if (b == n || (hit = toml_key_hit(l + a, b - a, keys)) < 0)
                                return -1;
                        table = hit;
                        if (table)
                                sbx_buf_printf(out, "%.*s\n", (int)n, l);
                } else if (i < n && l[i] != '#' && l[i] != '\r') {
                        if (toml_scan(l + i, n - i, &depth, &eq) < 0 || eq == n - i ||
                            (hit = toml_key_hit(l + i, eq, keys)) < 0)
                                return -1;
                        cont = table || hit;
                        if (cont)
                                sbx_buf_printf(out, "%s%.*s\n", table ? "" : "@", (int)n, l);
                }
                if (depth < 0)
                        return -1;
                l = next;
        }
        return 0;
}

/* @e was a file and @cur (@len bytes) is what it held. */
static bool same_bytes(const struct gentry *e, const char *cur, size_t len)
{
        return e->state == G_FILE && e->orig && cur && len == e->orig_len &&
               memcmp(cur, e->orig, len) == 0;
}

/* A TOML @e: put back whole when a guarded table or key changed (run_guard_toml_guarded(); any
 * change of a file it cannot follow). @cur/@len: the file now. 0 or a negative errno. */
static int restore_toml(const struct gentry *e, const char *cur, size_t len, struct sbx_buf *said)
{
        struct sbx_buf a = {0}, b = {0};
        bool changed;

        if (same_bytes(e, cur, len))
                return 0;
        int ra = e->state == G_FILE ? run_guard_toml_guarded(e->orig, e->keys, &a) : 0;
        int rb = run_guard_toml_guarded(cur, e->keys, &b);
        changed =
            ra < 0 || rb < 0 || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len) != 0);
        sbx_buf_done(&a);
        sbx_buf_done(&b);
        if (!changed)
                return 0;
        return restore_whole(e,
                             ra < 0 || rb < 0 ? "changed and the line scanner cannot follow it"
                                              : "had its guarded tables or keys changed",
                             said);
}

/* A JSON @e: each changed KEY put back (fix_keys) and the file written; put back whole when it
 * no longer parses as an object. @cur/@len: the file now, @mode its bits. 0 or -errno. */
static int restore_json(const struct gentry *e, const char *cur, size_t len, unsigned mode,
                        struct sbx_buf *said)
{
        struct json_object *o = e->state == G_FILE ? json_tokener_parse(e->orig) : NULL;
        struct json_object *c = json_tokener_parse(cur);
        struct sbx_buf keys = {0};
        int r = 0;

        if (same_bytes(e, cur, len))
                goto out;
        /* json-c cuts a key at \u0000: "hooks\u0000" hid "hooks" from it, not from the agent */
        if (sbx_json_has_nul_escape(cur, len) ||
            (e->state == G_FILE && sbx_json_has_nul_escape(e->orig, e->orig_len))) {
                r = restore_whole(e,
                                  "holds a \\u0000 escape, which the guard's JSON reader cannot "
                                  "follow as the agent's does",
                                  said);
                goto out;
        }
        if (!c || !json_object_is_type(c, json_type_object) ||
            (e->state == G_FILE && (!o || !json_object_is_type(o, json_type_object)))) {
                r = restore_whole(e, c ? "is not the JSON object it was" : "no longer parses",
                                  said);
                goto out;
        }
        if (fix_keys(o, c, e->keys, &keys) > 0) {
                const char *text = json_object_to_json_string_ext(
                    c, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                           JSON_C_TO_STRING_NOSLASHESCAPE);
                r = write_atomic(e->path, text, strlen(text), mode);
                if (r < 0)
                        fprintf(stderr,
                                "vestibule-mcp run: --agent: %s: cannot write back %s: %s; the "
                                "journal is kept for the next run\n",
                                e->path, keys.data, strerror(-r));
                else
                        sbx_buf_printf(said, "%s: %s", e->path, keys.data);
        }
out:
        sbx_buf_done(&keys);
        json_object_put(o);
        json_object_put(c);
        return r;
}

/* A readonly path, or a guarded file that was a symlink (or is one now): what is there now
 * moved aside when it is not what was recorded. 0 or a negative errno. */
static int restore_place(const struct gentry *e, struct sbx_buf *said)
{
        char target[PATH_MAX];
        struct stat st;
        ssize_t n;

        if (lstat(e->path, &st) < 0)
                return e->state == G_LINK ? restore_whole(e, "was removed", said) : 0;
        if (e->state == G_PRESENT)
                return 0; /* it was bound read-only */
        if (e->state == G_LINK && S_ISLNK(st.st_mode) &&
            (n = readlink(e->path, target, sizeof(target) - 1)) >= 0 && (size_t)n == e->orig_len &&
            memcmp(target, e->orig, (size_t)n) == 0)
                return 0;
        return restore_whole(e, e->state == G_ABSENT ? "was made by the run" : "was replaced",
                             said);
}

/* Put @e back as run_guard_end() says. 0 (@said empty: nothing changed) or a negative errno. */
static int restore_entry(const struct gentry *e, struct sbx_buf *said)
{
        _cleanup_free_ char *cur = NULL;
        size_t len = 0;
        unsigned mode = e->mode;
        int r;

        if (e->kind == G_DIR || e->state == G_LINK)
                return restore_place(e, said);
        r = read_whole(e->path, &cur, &len, &mode);
        if (r == -ENOENT || (r == 0 && !cur))
                return 0; /* removed: it runs nothing */
        if (r == -ELOOP || r == -EINVAL)
                return restore_whole(e, "was replaced by something not a file", said);
        if (r < 0) {
                fprintf(stderr,
                        "vestibule-mcp run: --agent: cannot read %s back: %s; the journal is "
                        "kept for the next run\n",
                        e->path, strerror(-r));
                return r;
        }
        return e->kind == G_TOML ? restore_toml(e, cur, len, said)
                                 : restore_json(e, cur, len, mode, said);
}

/* Put back every entry of the journal @dir; remove it when all went. Said on stderr (@who:
 * "the run" or "a run that was killed"), and into @tried. 0, or -1 when one failed. */
static int restore_journal(const char *dir, const char *who, char *tried, size_t size)
{
        struct gentry *v = NULL;
        size_t n = 0;
        int bad = 0;

        if (journal_read(dir, &v, &n) < 0) {
                fprintf(stderr,
                        "vestibule-mcp run: --agent: the guard journal %s cannot be read; look "
                        "at it and remove it\n",
                        dir);
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                struct sbx_buf said = {0};
                if (restore_entry(&v[i], &said) < 0)
                        bad = -1;
                if (said.len) {
                        fprintf(stderr,
                                "vestibule-mcp run: --agent: %s planted what the agent would "
                                "run on the host, put back: %s\n",
                                who, said.data);
                        size_t at = tried ? strlen(tried) : 0;
                        if (tried && at + 1 < size)
                                snprintf(tried + at, size - at, "%splanted %s (restored)",
                                         at ? ", " : "", said.data);
                }
                sbx_buf_done(&said);
        }
        gentries_free(v, n);
        if (bad == 0)
                journal_remove(dir);
        return bad;
}

/* Where another run still going recorded one of @v's paths, take its record: the keys its
 * agent may have planted since are not the user's. */
static void adopt_live(const char *root, struct gentry *v, size_t n, const char *own)
{
        _cleanup_(strv_freep) char **names = NULL;
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || sbx_dir_names(fd, NULL, &names) < 0)
                return;
        for (size_t j = 0; names[j]; j++) {
                _cleanup_free_ char *dir = xasprintf("%s/%s", root, names[j]);
                struct gentry *o = NULL;
                size_t m = 0;
                if (names[j][0] == '.' || strcmp(names[j], own) == 0 || !journal_alive(names[j]) ||
                    journal_read(dir, &o, &m) < 0)
                        continue;
                for (size_t a = 0; a < n; a++)
                        for (size_t b = 0; b < m; b++) {
                                if (strcmp(v[a].path, o[b].path) != 0 || v[a].kind != o[b].kind)
                                        continue;
                                free(v[a].orig);
                                v[a].orig = TAKE_PTR(o[b].orig);
                                v[a].orig_len = o[b].orig_len;
                                v[a].state = o[b].state;
                                v[a].mode = o[b].mode;
                        }
                gentries_free(o, m);
        }
}

/* Record every guard and readonly path of @p into @ret (@ret_n). 0 or -errno (@err says). */
static int record_all(const struct config_preset *p, struct gentry **ret, size_t *ret_n,
                      struct sbx_error *err)
{
        size_t n = 0, cap = p->n_guards;
        struct gentry *v;

        for (size_t i = 0; p->readonly && p->readonly[i]; i++)
                cap++;
        v = xcalloc(cap + 1, sizeof(*v));
        for (size_t i = 0; i < cap; i++) {
                bool ro = i >= p->n_guards;
                const char *path = ro ? p->readonly[i - p->n_guards] : p->guards[i].path;
                _cleanup_free_ char *keys = NULL;
                size_t pl = strlen(path);
                enum gkind kind = ro                                              ? G_DIR
                                  : pl > 5 && strcmp(path + pl - 5, ".toml") == 0 ? G_TOML
                                                                                  : G_JSON;
                int r = -EINVAL;
                if (!ro) {
                        struct sbx_buf k = {0};
                        for (size_t j = 0; p->guards[i].keys[j]; j++)
                                sbx_buf_printf(&k, "%s%s", j ? "," : "", p->guards[i].keys[j]);
                        keys = sbx_buf_steal(&k, NULL);
                }
                if (strpbrk(path, "\t\n") ||
                    (r = record_one(path, kind, keys ? keys : "", &v[n++])) < 0) {
                        gentries_free(v, n);
                        return sbx_fail(err, -r,
                                        "--agent: cannot record %s before the start (%s), so "
                                        "what the agent plants there could not be put back: "
                                        "make it a readable file (or remove it), or run the "
                                        "agent without --agent",
                                        path, strerror(-r));
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The journal folder @root lies in one of @writable (canonical paths) or holds one. */
static const char *journal_in_view(const char *root, char *const *writable)
{
        _cleanup_free_ char *real = realpath(root, NULL);

        for (size_t i = 0; real && writable && writable[i]; i++) {
                size_t n = strlen(writable[i]), m = strlen(real);
                if ((strncmp(real, writable[i], n) == 0 && (real[n] == '/' || !real[n])) ||
                    (strncmp(writable[i], real, m) == 0 && writable[i][m] == '/'))
                        return writable[i];
        }
        return NULL;
}

int run_guard_begin(const struct config_preset *p, char *const *writable, struct run_guard *g,
                    struct sbx_error *err)
{
        const char *hit;
        _cleanup_free_ char *root = NULL, *own = NULL;
        struct gentry *v = NULL;
        size_t n = 0, k = 0;
        int r;

        *g = (struct run_guard){0};
        g->readonly_at = xcalloc(1, sizeof(char *));
        if (p->n_guards == 0 && (!p->readonly || !p->readonly[0]))
                return 0;
        root = journal_root(true);
        if (!root)
                return sbx_fail(err, EACCES,
                                "--agent: cannot make the guard journal folder under "
                                "$XDG_STATE_HOME or ~/.local/state/vestibule (%s): it records "
                                "what the agent's files held before the start; make it "
                                "writable",
                                strerror(errno ? errno : ENOENT));
        hit = journal_in_view(root, writable);
        if (hit)
                return sbx_fail(err, EPERM,
                                "--agent: the guard journal folder %s is in the writable %s, "
                                "where the command could change what is put back: set "
                                "XDG_STATE_HOME to a folder outside it",
                                root, hit);
        r = record_all(p, &v, &n, err);
        if (r < 0)
                return r;
        own = xasprintf("%ld-%llu", (long)getpid(), sbx_proc_start_time(getpid()));
        adopt_live(root, v, n, own);
        r = journal_write(root, v, n, &g->journal);
        for (size_t i = 0; r == 0 && i < n; i++)
                if (v[i].kind == G_DIR && v[i].state == G_PRESENT) {
                        g->readonly_at = xrealloc(g->readonly_at, (k + 2) * sizeof(char *));
                        g->readonly_at[k++] = xstrdup(v[i].path);
                        g->readonly_at[k] = NULL;
                }
        g->n = n;
        gentries_free(v, n);
        if (r < 0)
                return sbx_fail(err, -r,
                                "--agent: cannot write the guard journal under %s: %s; free "
                                "the disk or make the folder writable",
                                root, strerror(-r));
        return 0;
}

void run_guard_end(struct run_guard *g, char *tried, size_t size)
{
        if (g->journal)
                (void)restore_journal(g->journal, "the run", tried, size);
        free(g->journal);
        g->journal = NULL;
        g->readonly_at = config_strv_free(g->readonly_at);
}

void run_guard_recover(void)
{
        _cleanup_free_ char *root = journal_root(false);
        _cleanup_(strv_freep) char **names = NULL;
        _cleanup_close_ int fd = root ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

        if (fd < 0 || sbx_dir_names(fd, NULL, &names) < 0)
                return;
        for (size_t i = 0; names[i]; i++) {
                _cleanup_free_ char *dir = xasprintf("%s/%s", root, names[i]);
                if (strncmp(names[i], ".tmp-", 5) == 0) {
                        /* a journal half-written by a run that then died: it never started */
                        if (sbx_proc_start_time((pid_t)strtol(names[i] + 5, NULL, 10)) == 0)
                                journal_remove(dir);
                        continue;
                }
                if (names[i][0] != '.' && !journal_alive(names[i]))
                        (void)restore_journal(dir, "a run that was killed", NULL, 0);
        }
}
