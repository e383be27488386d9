/* audit.c - the audit log: JSONL records written by one writer thread, and `vestibule-mcp
 * audit` to read them back.
 *
 * Writing. Each record is one line, built by the caller and queued for a single writer thread,
 * which creates the folder (0700, with any missing parents; an existing one keeps its mode)
 * and this process's file (0600, O_APPEND|O_NOFOLLOW|O_CLOEXEC) on the first record, appends
 * the line and fdatasync()s it (the records queued meanwhile go with it: one fdatasync
 * confirms them all, see audit_start_async_batch()). The caller waits at most 2 s for that
 * confirmation, so a
 * hanging disk (NFS gone, USB pulled) delays a run by 2 s at most and a failing one not at
 * all; either way the result gets an "audit:" note. fdatasync, not just write: a record the
 * kernel only has in its page cache is lost with the machine, and "confirmed" should mean on
 * disk. It costs a few ms per record on a local disk. A line whose write failed half-way is
 * followed by a newline before the next record, so the damage stays one unreadable line.
 *
 * The reserve. By default the audit folder shares its filesystem with the workspace, which
 * sandboxed code fills at will: one run filling the disk would cut the next run's start
 * record (issue 12, finding 24). So the writer keeps AUDIT_RESERVE_BYTES allocated past the
 * end of the file (fallocate(2) FALLOC_FL_KEEP_SIZE: blocks owned by the file, its size
 * unchanged), renewed after every record; an append lands in blocks the file already owns
 * and cannot fail with ENOSPC while the reserve lasts (~200 records of the largest kind).
 * When the reserve cannot be renewed, or a record cannot be written at all, the operator is
 * told on stderr (once per episode), not only the agent in the result's "audit:" note. On a
 * filesystem without fallocate (ENOTSUP: NFS v3, some FUSE) there is no reserve and the
 * stderr line says so once. The reserve is given back when the log closes.
 *
 * What a record holds: see the seed, "Usage numbers and the audit log". Strings are JSON with
 * every control character, DEL and C1 escaped as \uXXXX, so even `cat` of the raw file cannot
 * drive a terminal. Code that is not valid UTF-8 cannot be JSON text: each invalid byte is
 * written as the four characters \xNN ("code_utf8": false says so); code_sha256 and code_bytes
 * always describe the exact bytes the run received.
 *
 * Reading. audit_print() joins start and end by id across all *.jsonl files of the folder
 * (sorted by name, which starts with the file's UTC creation time), and prints every value
 * escaped again (control bytes, C1, bidi overrides, invalid UTF-8), since anyone who can write
 * the folder can put anything in it. Unreadable lines are skipped and counted. */
#include "audit/audit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit-internal.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "lazy/sha256.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* A JSON string. Each invalid UTF-8 byte becomes the text \xNN (returns false then). With
 * @ascii the output is ASCII only: every other character as \uXXXX (a surrogate pair above
 * U+FFFF), so it is safe on any terminal; without, valid UTF-8 is kept as it is and control
 * characters, DEL and C1 become \uXXXX (the record's form). */
static bool sb_json_str_mode(struct sbx_buf *b, const char *s, size_t n, bool ascii)
{
        static const char hex[] = "0123456789abcdef";
        bool utf8 = true;
        size_t i = 0;

        (void)sbx_buf_add(b, "\"", 1);
        while (i < n) {
                unsigned char ch = (unsigned char)s[i];
                uint32_t cp = 0;
                int l = sbx_utf8_decode(s + i, n - i, &cp);

                if (l <= 0) {
                        char e[6] = {'\\', '\\', 'x', hex[ch >> 4], hex[ch & 15], 0};
                        (void)sbx_buf_add(b, e, 5);
                        utf8 = false;
                        i++;
                        continue;
                }
                if (cp == '"')
                        (void)sbx_buf_add(b, "\\\"", 2);
                else if (cp == '\\')
                        (void)sbx_buf_add(b, "\\\\", 2);
                else if (cp == '\n')
                        (void)sbx_buf_add(b, "\\n", 2);
                else if (cp == '\t')
                        (void)sbx_buf_add(b, "\\t", 2);
                else if (cp == '\r' && !ascii)
                        (void)sbx_buf_add(b, "\\r", 2);
                else if (cp >= 0x20 && cp < 0x7f)
                        (void)sbx_buf_add(b, s + i, 1);
                else if (!ascii && cp > 0x9f)
                        (void)sbx_buf_add(b, s + i, (size_t)l);
                else if (cp < 0x10000)
                        (void)sbx_buf_printf(b, "\\u%04x", (unsigned)cp);
                else {
                        uint32_t v = cp - 0x10000;
                        (void)sbx_buf_printf(b, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)),
                                             (unsigned)(0xdc00 + (v & 0x3ff)));
                }
                i += (size_t)l;
        }
        (void)sbx_buf_add(b, "\"", 1);
        return utf8;
}

static bool sb_json_str(struct sbx_buf *b, const char *s, size_t n)
{
        return sb_json_str_mode(b, s, n, false);
}

static void sb_json_cstr(struct sbx_buf *b, const char *s)
{
        if (!s)
                (void)sbx_buf_puts(b, "null");
        else
                sb_json_str(b, s, strlen(s));
}

/* --- the log ----------------------------------------------------------------------------- */

struct audit_item {
        char *line;
        size_t len;
        unsigned batch_ms; /* the writer may wait this long for the next record, to confirm
                            * both with one fdatasync (audit_start_async_batch()) */
        bool done;
        int refs;       /* the caller and the writer; the last one frees */
        char note[256]; /* "" = recorded and confirmed */
};

struct audit_log {
        char *dir;
        char *path;

        pthread_mutex_t mu;
        pthread_cond_t work; /* the writer waits for items */
        pthread_cond_t done; /* callers wait for confirmation (CLOCK_MONOTONIC) */
        struct audit_item **queue;
        size_t q_head, q_len;
        bool thread_started, stopping;
        bool failing; /* the last record written was lost (its note is last_note) */
        char last_note[256];
        pthread_t thread;
        unsigned delay_ms; /* tests */

        /* Writer-thread only. */
        int fd;
        bool need_newline;
        bool reserve_short; /* the reserve could not be renewed: told on stderr once */
        bool no_reserve;    /* the filesystem has no fallocate: told once */
        bool write_failed;  /* a record was lost: told on stderr once until one is written */
};

static void item_unref_locked(struct audit_item *it)
{
        if (--it->refs == 0) {
                free(it->line);
                free(it);
        }
}

static int mkdir_p_0700(const char *dir)
{
        _cleanup_free_ char *p = xstrdup(dir);
        struct stat st;

        for (char *s = p + 1;; s++) {
                bool end = *s == '\0';
                if (!end && *s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0700) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (stat(p, &st) < 0)
                                return -errno;
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                }
                if (end)
                        return 0;
                *s = '/';
        }
}

/* Keep AUDIT_RESERVE_BYTES allocated past the end of the file (see the top of this file).
 * Writer thread only. */
static void reserve_renew(struct audit_log *log)
{
        struct stat st;

        if (log->no_reserve || fstat(log->fd, &st) < 0)
                return;
        if (fallocate(log->fd, FALLOC_FL_KEEP_SIZE, st.st_size, AUDIT_RESERVE_BYTES) == 0) {
                if (log->reserve_short)
                        log_info("audit: the reserve of '%s' is whole again", log->path);
                log->reserve_short = false;
                return;
        }
        if (errno == EOPNOTSUPP || errno == ENOSYS) {
                log->no_reserve = true;
                log_warning("audit: the filesystem of '%s' cannot reserve space (fallocate: %s): "
                            "a run that fills it can cut audit records; put VESTIBULE_AUDIT_DIR "
                            "on a local filesystem of its own",
                            log->dir, strerror(errno));
                return;
        }
        if (!log->reserve_short)
                log_error("audit: the filesystem of '%s' is full (%s): records now come out of a "
                          "%u KiB reserve, and are lost once it is spent; free space there (a "
                          "run may have filled the workspace, which shares it by default), or "
                          "put VESTIBULE_AUDIT_DIR on a filesystem of its own",
                          log->dir, strerror(errno), (unsigned)(AUDIT_RESERVE_BYTES >> 10));
        log->reserve_short = true;
}

/* A record was not written: the operator hears of it, not only the agent. */
static void tell_operator(struct audit_log *log, const char *note)
{
        if (log->write_failed)
                return;
        log->write_failed = true;
        log_error("audit: a record for '%s' was %s; fix the audit folder (free space, "
                  "permissions) or point VESTIBULE_AUDIT_DIR at a folder on a filesystem of its "
                  "own (told once until records are written again)",
                  log->path, note);
}

/* Append one line. Writer thread only. @note: "" on success. */
static void write_item_inner(struct audit_log *log, struct audit_item *it, unsigned delay_ms,
                             bool sync);

/* Append the @n records of @batch in order and fdatasync() once after the last: one
 * confirmation for all of them. A record whose write failed has its own note; when that
 * closed the file, the records before it in the batch were written but never synced, and say
 * so. */
static void write_batch(struct audit_log *log, struct audit_item **batch, size_t n,
                        unsigned delay_ms)
{
        for (size_t i = 0; i < n; i++) {
                write_item_inner(log, batch[i], delay_ms, i + 1 == n);
                if (batch[i]->note[0] && log->fd < 0)
                        for (size_t j = 0; j < i; j++)
                                if (!batch[j]->note[0])
                                        snprintf(batch[j]->note, sizeof(batch[j]->note),
                                                 "not confirmed (a later record's write failed "
                                                 "before the sync)");
        }
        for (size_t i = 0; i < n; i++) {
                if (batch[i]->note[0]) {
                        tell_operator(log, batch[i]->note);
                        continue;
                }
                if (log->write_failed)
                        log_info("audit: records for '%s' are written again", log->path);
                log->write_failed = false;
        }
        if (!batch[n - 1]->note[0])
                reserve_renew(log);
}

static void write_item_inner(struct audit_log *log, struct audit_item *it, unsigned delay_ms,
                             bool sync)
{
        struct stat st;
        size_t off = 0;
        int r;

        if (delay_ms)
                usleep(delay_ms * 1000u);
        /* The file was deleted (or the folder moved away) while the server ran: records
         * written to the old inode would vanish with it, so start a new file. */
        if (log->fd >= 0 && fstat(log->fd, &st) == 0 && st.st_nlink == 0) {
                close(log->fd);
                log->fd = -1;
                log->need_newline = false;
        }
        if (log->fd < 0) {
                r = mkdir_p_0700(log->dir);
                if (r < 0) {
                        snprintf(it->note, sizeof(it->note),
                                 "not recorded (cannot create the audit folder: %s)", strerror(-r));
                        return;
                }
                log->fd =
                    open(log->path,
                         O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
                if (log->fd < 0) {
                        snprintf(it->note, sizeof(it->note),
                                 "not recorded (cannot open the audit file: %s)", strerror(errno));
                        return;
                }
                if (fstat(log->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(log->fd);
                        log->fd = -1;
                        snprintf(it->note, sizeof(it->note),
                                 "not recorded (the audit file is not a regular file)");
                        return;
                }
                /* Ours and 0600, whatever an earlier file of the same name had. */
                if ((st.st_mode & 07777) != 0600)
                        (void)fchmod(log->fd, 0600);
                reserve_renew(log); /* before the first record, which it then protects */
        }
        if (log->need_newline) {
                if (write(log->fd, "\n", 1) == 1)
                        log->need_newline = false;
        }
        while (off < it->len) {
                ssize_t n = write(log->fd, it->line + off, it->len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;
                        if (off > 0)
                                log->need_newline = true;
                        snprintf(it->note, sizeof(it->note),
                                 "not recorded (cannot write the audit file: %s)", strerror(e));
                        /* Reopen on the next record: the folder may come back. */
                        close(log->fd);
                        log->fd = -1;
                        return;
                }
                off += (size_t)n;
        }
        if (sync && fdatasync(log->fd) < 0 && errno != EINVAL && errno != EROFS)
                snprintf(it->note, sizeof(it->note),
                         "not confirmed (the disk reported an error on sync: %s)", strerror(errno));
}

/* Under the lock: move the queued records (at most @max - *@n) into @batch. */
static void take_queued(struct audit_log *log, struct audit_item **batch, size_t *n, size_t max)
{
        while (log->q_len > 0 && *n < max) {
                batch[(*n)++] = log->queue[log->q_head];
                log->q_head = (log->q_head + 1) % AUDIT_QUEUE_MAX;
                log->q_len--;
        }
}

static void *writer_main(void *arg)
{
        struct audit_log *log = arg;
        struct audit_item *batch[AUDIT_BATCH_MAX];

        pthread_mutex_lock(&log->mu);
        for (;;) {
                size_t n = 0;

                while (log->q_len == 0 && !log->stopping)
                        pthread_cond_wait(&log->work, &log->mu);
                if (log->q_len == 0)
                        break;
                /* Group commit: every record queued by now goes to the disk with one
                 * fdatasync. A record that asked for it (a session cell's start record: the
                 * cell's end record usually follows within a millisecond) waits a little for
                 * the next one first, unless the log is failing (a run then waits for its
                 * start record before it starts, issue 12) or stopping. */
                take_queued(log, batch, &n, AUDIT_BATCH_MAX);
                if (n < AUDIT_BATCH_MAX && log->q_len == 0 && batch[n - 1]->batch_ms &&
                    !log->failing && !log->stopping) {
                        struct timespec until;
                        clock_gettime(CLOCK_MONOTONIC, &until);
                        until.tv_nsec += (long)batch[n - 1]->batch_ms * 1000000L;
                        until.tv_sec += until.tv_nsec / 1000000000L;
                        until.tv_nsec %= 1000000000L;
                        while (log->q_len == 0 && !log->stopping)
                                if (pthread_cond_timedwait(&log->work, &log->mu, &until) ==
                                    ETIMEDOUT)
                                        break;
                        take_queued(log, batch, &n, AUDIT_BATCH_MAX);
                }
                unsigned delay_ms = log->delay_ms;
                pthread_mutex_unlock(&log->mu);

                write_batch(log, batch, n, delay_ms);

                pthread_mutex_lock(&log->mu);
                for (size_t i = 0; i < n; i++) {
                        struct audit_item *it = batch[i];
                        log->failing = it->note[0] != '\0';
                        if (log->failing)
                                snprintf(log->last_note, sizeof(log->last_note), "%s", it->note);
                        it->done = true;
                        item_unref_locked(it);
                }
                pthread_cond_broadcast(&log->done);
        }
        pthread_mutex_unlock(&log->mu);
        return NULL;
}

/* A queued record and the moment its caller stops waiting for the disk. */
struct audit_pending {
        struct audit_log *log;
        struct audit_item *it; /* NULL: never queued, note says why */
        struct timespec deadline;
        char note[256];
};

/* Queue @line (taken over) for the writer. The 2 s the caller may wait for the confirmation
 * run from now, so a caller that waits later (audit_start_async) never waits longer. */
static struct audit_pending *submit_queue_batch(struct audit_log *log, char *line, size_t len,
                                                unsigned batch_ms)
{
        struct audit_pending *p = xcalloc(1, sizeof(*p));
        struct audit_item *it;
        int r;

        p->log = log;
        if (!log) {
                free(line);
                snprintf(p->note, sizeof(p->note), "not recorded (the audit log is not open)");
                return p;
        }
        it = xcalloc(1, sizeof(*it));
        it->line = line;
        it->len = len;
        it->batch_ms = batch_ms;
        it->refs = 2;

        pthread_mutex_lock(&log->mu);
        if (!log->thread_started) {
                pthread_attr_t attr;
                sigset_t all, old;
                /* The writer takes no signals: they stay with the threads that wait for
                 * them (a signalfd needs them blocked in every thread). */
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old);
                pthread_attr_init(&attr);
                pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
                r = pthread_create(&log->thread, &attr, writer_main, log);
                pthread_attr_destroy(&attr);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (r != 0) {
                        pthread_mutex_unlock(&log->mu);
                        free(it->line);
                        free(it);
                        snprintf(p->note, sizeof(p->note),
                                 "not recorded (cannot start the audit writer: %s)", strerror(r));
                        return p;
                }
                log->thread_started = true;
        }
        if (log->q_len >= AUDIT_QUEUE_MAX || log->stopping) {
                pthread_mutex_unlock(&log->mu);
                free(it->line);
                free(it);
                snprintf(p->note, sizeof(p->note),
                         "not recorded (the disk has not answered for the last %u records)",
                         (unsigned)AUDIT_QUEUE_MAX);
                return p;
        }
        log->queue[(log->q_head + log->q_len) % AUDIT_QUEUE_MAX] = it;
        log->q_len++;
        pthread_cond_signal(&log->work);
        pthread_mutex_unlock(&log->mu);

        clock_gettime(CLOCK_MONOTONIC, &p->deadline);
        p->deadline.tv_sec += AUDIT_CONFIRM_TIMEOUT_MS / 1000;
        p->deadline.tv_nsec += (long)(AUDIT_CONFIRM_TIMEOUT_MS % 1000) * 1000000L;
        if (p->deadline.tv_nsec >= 1000000000L) {
                p->deadline.tv_sec++;
                p->deadline.tv_nsec -= 1000000000L;
        }
        p->it = it;
        return p;
}

static struct audit_pending *submit_queue(struct audit_log *log, char *line, size_t len)
{
        return submit_queue_batch(log, line, len, 0);
}

void audit_pending_wait(struct audit_pending *p, char *note, size_t note_size)
{
        struct audit_log *log;
        struct audit_item *it;

        if (note && note_size)
                note[0] = '\0';
        if (!p)
                return;
        log = p->log;
        it = p->it;
        if (!it) {
                if (note && note_size)
                        snprintf(note, note_size, "%s", p->note);
                free(p);
                return;
        }
        pthread_mutex_lock(&log->mu);
        while (!it->done) {
                int r = pthread_cond_timedwait(&log->done, &log->mu, &p->deadline);
                if (r == ETIMEDOUT)
                        break;
        }
        if (note && note_size) {
                if (it->done)
                        snprintf(note, note_size, "%s", it->note);
                else
                        snprintf(note, note_size,
                                 "not confirmed (the disk did not answer within 2 s)");
        }
        item_unref_locked(it);
        pthread_mutex_unlock(&log->mu);
        free(p);
}

/* Queue @line (taken over) and wait for its confirmation, at most 2 s. */
static void submit(struct audit_log *log, char *line, size_t len, char *note, size_t note_size)
{
        audit_pending_wait(submit_queue(log, line, len), note, note_size);
}

/* --- paths: refuse an audit folder inside the workspace or the rootfs folder --------------- */

/* Lexically normalised absolute path: no "//", ".", trailing "/"; ".." pops. */
static char *path_normalise(const char *p)
{
        char *out = xmalloc(strlen(p) + 2);
        size_t o = 0;

        while (*p) {
                const char *s;
                size_t n;
                while (*p == '/')
                        p++;
                s = p;
                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - s);
                if (n == 0 || (n == 1 && s[0] == '.'))
                        continue;
                if (n == 2 && s[0] == '.' && s[1] == '.') {
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                        continue;
                }
                out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        return out;
}

/* realpath() of the longest existing prefix, with the rest appended: a folder that does not
 * exist yet still resolves through the symlinks of the part that does. */
static char *path_resolve(const char *p)
{
        _cleanup_free_ char *norm = path_normalise(p);
        size_t cut = strlen(norm);

        for (;;) {
                char saved = norm[cut];
                norm[cut] = '\0';
                _cleanup_free_ char *real = realpath(cut ? norm : "/", NULL);
                norm[cut] = saved;
                if (real) {
                        _cleanup_free_ char *joined =
                            xasprintf("%s%s", strcmp(real, "/") == 0 ? "" : real, norm + cut);
                        return path_normalise(joined[0] ? joined : "/");
                }
                if (cut == 0)
                        return xstrdup(norm);
                while (cut > 0 && norm[cut - 1] != '/')
                        cut--;
                if (cut > 0)
                        cut--;
        }
}

static bool path_inside(const char *inner, const char *outer)
{
        size_t n = strlen(outer);

        if (strcmp(outer, "/") == 0)
                return true;
        return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static int check_outside(const char *audit_dir, const char *other, const char *what,
                         const char *var, struct sbx_error *err)
{
        _cleanup_free_ char *a_norm = NULL, *a_real = NULL, *o_norm = NULL, *o_real = NULL;

        if (!other)
                return 0;
        a_norm = path_normalise(audit_dir);
        a_real = path_resolve(audit_dir);
        o_norm = path_normalise(other);
        o_real = path_resolve(other);
        const char *as[] = {a_norm, a_real}, *os[] = {o_norm, o_real};
        for (size_t i = 0; i < 2; i++)
                for (size_t j = 0; j < 2; j++)
                        if (path_inside(as[i], os[j]) || path_inside(os[j], as[i]))
                                return sbx_fail(
                                    err, EINVAL,
                                    "the audit folder '%s' and %s '%s' (%s) overlap, so "
                                    "sandboxed code could rewrite the records; set "
                                    "VESTIBULE_AUDIT_DIR to a folder outside both, such "
                                    "as ~/.vestibule/audit, and restart the server",
                                    audit_dir, what, other, var);
        return 0;
}

int audit_open(const struct sbx_config *cfg, struct audit_log **ret, struct sbx_error *err)
{
        struct audit_log *log;
        pthread_condattr_t ca;
        struct timespec now;
        struct tm tm;
        char stamp[32];
        int r;

        if (!cfg->audit_dir || cfg->audit_dir[0] != '/')
                return sbx_fail(err, EINVAL,
                                "the audit folder '%s' is not an absolute path; set "
                                "VESTIBULE_AUDIT_DIR to one (or start it with ~/) and restart the "
                                "server",
                                cfg->audit_dir ? cfg->audit_dir : "");
        r = check_outside(cfg->audit_dir, cfg->workspace_dir, "the workspace",
                          "VESTIBULE_WORKSPACE", err);
        if (r < 0)
                return r;
        r = check_outside(cfg->audit_dir, cfg->rootfs_dir, "the rootfs folder",
                          "VESTIBULE_ROOTFS_DIR", err);
        if (r < 0)
                return r;

        log = xcalloc(1, sizeof(*log));
        log->dir = path_normalise(cfg->audit_dir);
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        log->path = xasprintf("%s/%s-%d.jsonl", log->dir, stamp, (int)getpid());
        log->fd = -1;
        log->queue = xcalloc(AUDIT_QUEUE_MAX, sizeof(struct audit_item *));
        pthread_mutex_init(&log->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&log->work, &ca);
        pthread_cond_init(&log->done, &ca);
        pthread_condattr_destroy(&ca);
        *ret = log;
        return 0;
}

struct audit_log *audit_close(struct audit_log *log)
{
        struct timespec deadline;

        if (!log)
                return NULL;
        pthread_mutex_lock(&log->mu);
        log->stopping = true;
        pthread_cond_broadcast(&log->work);
        pthread_mutex_unlock(&log->mu);
        if (log->thread_started) {
                /* A writer stuck in a dead disk must not hold up the server's exit: after 2 s
                 * it is left behind, and so is the memory it uses. */
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += AUDIT_CONFIRM_TIMEOUT_MS / 1000;
                if (pthread_timedjoin_np(log->thread, NULL, &deadline) != 0) {
                        pthread_detach(log->thread);
                        log_warning("the audit writer did not finish within 2 s; records still "
                                    "queued for '%s' may be lost",
                                    log->path);
                        return NULL;
                }
        }
        if (log->fd >= 0) {
                struct stat st;
                /* give the reserve back: blocks past the end are the file's until punched */
                if (!log->no_reserve && fstat(log->fd, &st) == 0)
                        (void)fallocate(log->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                        st.st_size, AUDIT_RESERVE_BYTES);
                close(log->fd);
        }
        pthread_mutex_destroy(&log->mu);
        pthread_cond_destroy(&log->work);
        pthread_cond_destroy(&log->done);
        free(log->queue);
        free(log->dir);
        free(log->path);
        free(log);
        return NULL;
}

bool audit_failing(struct audit_log *log, char *why, size_t why_size)
{
        bool f;

        if (!log)
                return false;
        pthread_mutex_lock(&log->mu);
        f = log->failing;
        if (f && why && why_size)
                snprintf(why, why_size, "%s", log->last_note);
        /* a disk that stopped answering: the queue is full and new records are refused */
        if (!f && log->q_len >= AUDIT_QUEUE_MAX) {
                f = true;
                if (why && why_size)
                        snprintf(why, why_size, "the disk has not answered for the last %u records",
                                 (unsigned)AUDIT_QUEUE_MAX);
        }
        pthread_mutex_unlock(&log->mu);
        return f;
}

const char *audit_path(const struct audit_log *log)
{
        return log ? log->path : NULL;
}

void audit_set_writer_delay_ms(struct audit_log *log, unsigned ms)
{
        pthread_mutex_lock(&log->mu);
        log->delay_ms = ms;
        pthread_mutex_unlock(&log->mu);
}

/* --- records ----------------------------------------------------------------------------- */

static void new_id(char ret_id[33])
{
        static const char hex[] = "0123456789abcdef";
        static unsigned long counter;
        unsigned char rnd[16];
        ssize_t n = getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);

        if (n != (ssize_t)sizeof(rnd)) {
                /* Early boot without entropy: unique within the process is enough. */
                struct timespec ts;
                unsigned long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
                clock_gettime(CLOCK_REALTIME, &ts);
                snprintf(ret_id, 33, "%08x%08lx%08lx%08lx", (unsigned)getpid(),
                         (unsigned long)ts.tv_sec & 0xffffffffUL,
                         (unsigned long)ts.tv_nsec & 0xffffffffUL, c & 0xffffffffUL);
                return;
        }
        for (size_t i = 0; i < sizeof(rnd); i++) {
                ret_id[2 * i] = hex[rnd[i] >> 4];
                ret_id[2 * i + 1] = hex[rnd[i] & 15];
        }
        ret_id[32] = '\0';
}

/* "2026-11-29T17:04:55.123Z" */
static void rfc3339_now(char buf[32])
{
        struct timespec now;
        struct tm tm;
        char base[24];

        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, 32, "%.20s.%03uZ", base, (unsigned)(now.tv_nsec / 1000000L) % 1000u);
}

static void record_head(struct sbx_buf *b, const char *kind, const char *id)
{
        char t[32];

        rfc3339_now(t);
        (void)sbx_buf_printf(b, "{\"v\":1,\"kind\":\"%s\",\"id\":", kind);
        sb_json_cstr(b, id);
        (void)sbx_buf_printf(b, ",\"time\":\"%s\",\"pid\":%d", t, (int)getpid());
}

/* The first 4 KiB of the code, cut on a character boundary, its SHA-256 and its size. */
static void record_code(struct sbx_buf *b, const char *code, size_t code_len)
{
        char hex[SBX_SHA256_HEX_LEN + 1];
        size_t keep = code_len < AUDIT_CODE_MAX_BYTES ? code_len : AUDIT_CODE_MAX_BYTES;
        bool utf8;

        if (!code)
                code_len = keep = 0;
        /* Do not split a valid multi-byte character at the cut. */
        if (keep < code_len) {
                size_t start = keep;
                while (start > 0 && start > keep - 3 && ((unsigned char)code[start] & 0xc0) == 0x80)
                        start--;
                int l = sbx_utf8_decode(code + start, code_len - start, NULL);
                if (l > 0 && start + (size_t)l > keep)
                        keep = start;
        }
        (void)sbx_buf_puts(b, ",\"code\":");
        utf8 = sb_json_str(b, code ? code : "", keep);
        (void)sbx_buf_printf(b, ",\"code_utf8\":%s,\"code_truncated\":%s,\"code_bytes\":%zu",
                             utf8 ? "true" : "false", keep < code_len ? "true" : "false", code_len);
        struct sbx_error herr = {0};
        if (sbx_sha256_hex(code ? code : "", code_len, hex, &herr) == 0) {
                (void)sbx_buf_printf(b, ",\"code_sha256\":\"%s\"", hex);
        } else {
                /* the record still says what ran (the code itself, its size) and why no hash */
                log_warning("audit: %s", herr.msg);
                (void)sbx_buf_puts(b, ",\"code_sha256\":null,\"code_sha256_error\":");
                sb_json_cstr(b, herr.msg);
        }
}

static const char *const lang_names[] = {"python", "node", "bash"};

struct audit_pending *audit_start_async(struct audit_log *log, enum sbx_language lang,
                                        unsigned timeout_s, const char *backend, const char *code,
                                        size_t code_len, char ret_id[33])
{
        return audit_start_async_batch(log, lang, timeout_s, backend, code, code_len, 0, ret_id);
}

struct audit_pending *audit_start_async_batch(struct audit_log *log, enum sbx_language lang,
                                              unsigned timeout_s, const char *backend,
                                              const char *code, size_t code_len, unsigned batch_ms,
                                              char ret_id[33])
{
        struct audit_pending *p;
        struct sbx_buf b = {0};

        new_id(ret_id);
        record_head(&b, "start", ret_id);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, (size_t)lang < ELEMENTSOF(lang_names) ? lang_names[lang] : "unknown");
        (void)sbx_buf_printf(&b, ",\"timeout_s\":%u,\"backend\":", timeout_s);
        sb_json_cstr(&b, backend);
        record_code(&b, code, code_len);
        (void)sbx_buf_puts(&b, "}\n");
        p = submit_queue_batch(log, b.data, b.len, batch_ms);
        return p;
}

void audit_start(struct audit_log *log, enum sbx_language lang, unsigned timeout_s,
                 const char *backend, const char *code, size_t code_len, char ret_id[33],
                 char *note, size_t note_size)
{
        audit_pending_wait(audit_start_async(log, lang, timeout_s, backend, code, code_len, ret_id),
                           note, note_size);
}

/* The record's outcome: the result's name, except that a call that never ran "failed". */
static const char *outcome_name(enum run_outcome o)
{
        return o == RUN_OUTCOME_NONE ? "failed" : run_outcome_name(o);
}

static void record_measure(struct sbx_buf *b, const char *name, const struct run_measure *m)
{
        if (m->measured)
                (void)sbx_buf_printf(b, ",\"%s\":%llu", name, (unsigned long long)m->value);
        else
                (void)sbx_buf_printf(b, ",\"%s\":null", name);
}

/* A fixed-size char array from struct run_result, NUL-terminated or not. */
static void record_field(struct sbx_buf *b, const char *name, const char *s, size_t size)
{
        (void)sbx_buf_printf(b, ",\"%s\":", name);
        sb_json_str(b, s, strnlen(s, size));
}

void audit_end(struct audit_log *log, const char *id, const struct run_result *res, char *note,
               size_t note_size)
{
        audit_pending_wait(audit_end_async(log, id, res), note, note_size);
}

/* The end record's usage: wall time, the measures, and why any was not measured. */
static void record_usage(struct sbx_buf *b, const struct run_usage *u)
{
        (void)sbx_buf_printf(b, ",\"wall_ms\":%llu", (unsigned long long)u->wall_ms);
        record_measure(b, "cpu_us", &u->cpu_us);
        record_measure(b, "mem_peak_bytes", &u->mem_peak_bytes);
        record_measure(b, "pids_peak", &u->pids_peak);
        if (!u->cpu_us.measured || !u->mem_peak_bytes.measured || !u->pids_peak.measured) {
                const char *sep = "";
                (void)sbx_buf_puts(b, ",\"not_measured\":{");
                if (!u->cpu_us.measured) {
                        (void)sbx_buf_puts(b, "\"cpu_us\":");
                        sb_json_str(b, u->cpu_us.why,
                                    strnlen(u->cpu_us.why, sizeof(u->cpu_us.why)));
                        sep = ",";
                }
                if (!u->mem_peak_bytes.measured) {
                        (void)sbx_buf_printf(b, "%s\"mem_peak_bytes\":", sep);
                        sb_json_str(b, u->mem_peak_bytes.why,
                                    strnlen(u->mem_peak_bytes.why, sizeof(u->mem_peak_bytes.why)));
                        sep = ",";
                }
                if (!u->pids_peak.measured) {
                        (void)sbx_buf_printf(b, "%s\"pids_peak\":", sep);
                        sb_json_str(b, u->pids_peak.why,
                                    strnlen(u->pids_peak.why, sizeof(u->pids_peak.why)));
                }
                (void)sbx_buf_puts(b, "}");
        }
}

/* Every decision of the egress proxy, folded by host:port and verdict. */
static void record_egress(struct sbx_buf *b, const struct run_egress *g)
{
        (void)sbx_buf_puts(b, ",\"egress\":{\"policy\":\"allowlist\",\"decisions\":[");
        for (size_t i = 0; i < g->n_entries; i++) {
                const struct run_egress_entry *e = &g->entries[i];
                (void)sbx_buf_puts(b, i ? ",{\"host\":" : "{\"host\":");
                sb_json_str(b, e->host, strnlen(e->host, sizeof(e->host)));
                (void)sbx_buf_printf(b, ",\"port\":%u,\"verdict\":\"%s\",\"reason\":", e->port,
                                     e->allowed ? "allowed" : "denied");
                if (e->reason)
                        sb_json_cstr(b, e->reason);
                else
                        (void)sbx_buf_puts(b, "null");
                (void)sbx_buf_printf(
                    b, ",\"connections\":%u,\"bytes_up\":%llu,\"bytes_down\":%llu}", e->connections,
                    (unsigned long long)e->bytes_up, (unsigned long long)e->bytes_down);
        }
        (void)sbx_buf_printf(b, "],\"unlisted\":%llu", (unsigned long long)g->records_dropped);
        record_field(b, "note", g->note, sizeof(g->note));
        (void)sbx_buf_puts(b, "}");
}

struct audit_pending *audit_end_async(struct audit_log *log, const char *id,
                                      const struct run_result *res)
{
        struct sbx_buf b = {0};

        record_head(&b, "end", id ? id : "");
        (void)sbx_buf_printf(&b, ",\"outcome\":\"%s\"", outcome_name(res->outcome));
        if (res->outcome == RUN_OUTCOME_EXITED)
                (void)sbx_buf_printf(&b, ",\"exit_code\":%d", res->exit_code);
        else
                (void)sbx_buf_puts(&b, ",\"exit_code\":null");
        if (res->outcome == RUN_OUTCOME_SIGNALED) {
                const char *abbrev = sigabbrev_np(res->term_signal);
                (void)sbx_buf_printf(&b, ",\"signal\":%d,\"signal_name\":", res->term_signal);
                if (abbrev)
                        (void)sbx_buf_printf(&b, "\"SIG%s\"", abbrev);
                else
                        (void)sbx_buf_puts(&b, "null");
        } else
                (void)sbx_buf_puts(&b, ",\"signal\":null");
        record_usage(&b, &res->usage);
        /* Output: its sizes only, never its content. */
        (void)sbx_buf_printf(&b, ",\"stdout_bytes\":%llu,\"stderr_bytes\":%llu",
                             (unsigned long long)res->out.total,
                             (unsigned long long)res->err.total);
        record_field(&b, "blocked_syscalls", res->blocked_syscalls, sizeof(res->blocked_syscalls));
        (void)sbx_buf_printf(&b, ",\"blocked_reporting_stopped\":%s,\"oom\":%s",
                             res->blocked_reporting_stopped ? "true" : "false",
                             res->oom_killed ? "true" : "false");
        if (res->oom_killed)
                (void)sbx_buf_printf(&b, ",\"mem_limit_bytes\":%llu",
                                     (unsigned long long)res->mem_limit_bytes);
        record_field(&b, "limits_hit", res->limits_hit, sizeof(res->limits_hit));
        record_field(&b, "image", res->image, sizeof(res->image));
        record_field(&b, "backend", res->backend, sizeof(res->backend));
        record_field(&b, "isolation", res->isolation, sizeof(res->isolation));
        if (res->egress.on)
                record_egress(&b, &res->egress);
        if (res->session[0]) {
                record_field(&b, "session", res->session, sizeof(res->session));
                (void)sbx_buf_printf(&b, ",\"session_call\":%llu",
                                     (unsigned long long)res->session_call);
        }
        (void)sbx_buf_puts(&b, "}\n");
        return submit_queue(log, b.data, b.len);
}

void audit_session(struct audit_log *log, bool start, const char *session, const char *language,
                   const char *backend, const char *isolation, const char *reason,
                   unsigned long long calls, char *note, size_t note_size)
{
        struct sbx_buf b = {0};
        char id[33];

        new_id(id);
        record_head(&b, start ? "session_start" : "session_end", id);
        (void)sbx_buf_puts(&b, ",\"session\":");
        sb_json_cstr(&b, session);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, language);
        (void)sbx_buf_puts(&b, ",\"backend\":");
        sb_json_cstr(&b, backend ? backend : "");
        if (start) {
                (void)sbx_buf_puts(&b, ",\"isolation\":");
                sb_json_cstr(&b, isolation ? isolation : "");
        } else {
                (void)sbx_buf_printf(&b, ",\"calls\":%llu,\"reason\":", calls);
                sb_json_cstr(&b, reason ? reason : "");
        }
        (void)sbx_buf_puts(&b, "}\n");
        submit(log, b.data, b.len, note, note_size);
}

void audit_blocked(struct audit_log *log, const char *language, const char *code, size_t code_len,
                   const char *reason, char *note, size_t note_size)
{
        struct sbx_buf b = {0};
        char id[33];

        new_id(id);
        record_head(&b, "blocked", id);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, language);
        record_code(&b, code, code_len);
        (void)sbx_buf_puts(&b, ",\"reason\":");
        sb_json_cstr(&b, reason ? reason : "");
        (void)sbx_buf_puts(&b, "}\n");
        submit(log, b.data, b.len, note, note_size);
}

/* --- reading: `vestibule-mcp audit` ------------------------------------------------------ */

/* Append @s escaped for a terminal (sbx_term_escape(): the one escaper every console
 * printer of untrusted text uses). */
static void sb_term(struct sbx_buf *b, const char *s, size_t n)
{
        _cleanup_free_ char *e = sbx_term_escape(s, n, false);

        (void)sbx_buf_puts(b, e);
}

/* ASCII-only JSON: non-ASCII as \uXXXX, so the output is safe on any terminal. */
static void sb_json_ascii_str(struct sbx_buf *b, const char *s, size_t n)
{
        (void)sb_json_str_mode(b, s, n, true);
}

static void sb_json_ascii(struct sbx_buf *b, json_object *o)
{
        switch (json_object_get_type(o)) {
        case json_type_null:
                (void)sbx_buf_puts(b, "null");
                return;
        case json_type_boolean:
                (void)sbx_buf_puts(b, json_object_get_boolean(o) ? "true" : "false");
                return;
        case json_type_int:
                (void)sbx_buf_printf(b, "%lld", (long long)json_object_get_int64(o));
                return;
        case json_type_double:
                if (isfinite(json_object_get_double(o)))
                        (void)sbx_buf_printf(b, "%.17g", json_object_get_double(o));
                else
                        (void)sbx_buf_puts(b, "null");
                return;
        case json_type_string:
                sb_json_ascii_str(b, json_object_get_string(o),
                                  (size_t)json_object_get_string_len(o));
                return;
        case json_type_array: {
                size_t n = json_object_array_length(o);
                (void)sbx_buf_puts(b, "[");
                for (size_t i = 0; i < n; i++) {
                        if (i)
                                (void)sbx_buf_puts(b, ",");
                        sb_json_ascii(b, json_object_array_get_idx(o, i));
                }
                (void)sbx_buf_puts(b, "]");
                return;
        }
        case json_type_object: {
                bool first = true;
                (void)sbx_buf_puts(b, "{");
                json_object_object_foreach(o, key, val)
                {
                        if (!first)
                                (void)sbx_buf_puts(b, ",");
                        first = false;
                        sb_json_ascii_str(b, key, strlen(key));
                        (void)sbx_buf_puts(b, ":");
                        sb_json_ascii(b, val);
                }
                (void)sbx_buf_puts(b, "}");
                return;
        }
        }
}

struct audit_call {
        json_object *start, *end, *blocked; /* borrowed from the records array */
};

struct audit_reader {
        json_object *records; /* array owning every parsed record */
        json_object *by_id;   /* id -> index into calls (start records only) */
        struct audit_call *calls;
        size_t n_calls, cap_calls;
        size_t corrupt;
};

static struct audit_call *call_new(struct audit_reader *rd)
{
        if (rd->n_calls == rd->cap_calls) {
                rd->cap_calls = rd->cap_calls ? rd->cap_calls * 2 : 64;
                rd->calls = xrealloc(rd->calls, rd->cap_calls * sizeof(*rd->calls));
        }
        memset(&rd->calls[rd->n_calls], 0, sizeof(rd->calls[0]));
        return &rd->calls[rd->n_calls++];
}

static const char *jstr(json_object *o, const char *key, size_t *len)
{
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        if (len)
                *len = (size_t)json_object_get_string_len(v);
        return json_object_get_string(v);
}

static bool jint(json_object *o, const char *key, int64_t *ret)
{
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

static void reader_line(struct audit_reader *rd, const char *line, size_t len)
{
        enum json_tokener_error jerr;
        json_object *o, *idx;
        const char *kind, *id;

        if (len == 0)
                return;
        if (strlen(line) != len) { /* a NUL byte: not a record we wrote */
                rd->corrupt++;
                return;
        }
        o = json_tokener_parse_verbose(line, &jerr);
        kind = jstr(o, "kind", NULL);
        id = jstr(o, "id", NULL);
        if (!o || !json_object_is_type(o, json_type_object) || !kind || !id) {
                json_object_put(o);
                rd->corrupt++;
                return;
        }
        json_object_array_add(rd->records, o);
        if (strcmp(kind, "start") == 0) {
                struct audit_call *c = call_new(rd);
                c->start = o;
                json_object_object_add(rd->by_id, id,
                                       json_object_new_int64((int64_t)rd->n_calls - 1));
        } else if (strcmp(kind, "blocked") == 0) {
                call_new(rd)->blocked = o;
        } else if (strcmp(kind, "end") == 0) {
                int64_t at;
                if (json_object_object_get_ex(rd->by_id, id, &idx) && rd->calls &&
                    (at = json_object_get_int64(idx)) >= 0 && (size_t)at < rd->n_calls) {
                        struct audit_call *c = &rd->calls[at];
                        if (!c->end) {
                                c->end = o;
                                return;
                        }
                }
                call_new(rd)->end = o; /* its start was lost */
        } else
                rd->corrupt++;
}

static int reader_file(struct audit_reader *rd, int dir_fd, const char *name)
{
        _cleanup_close_ int fd = -1;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -EINVAL;
        f = fdopen(fd, "r");
        if (!f)
                return -errno;
        fd = -1;
        while ((n = getline(&line, &cap, f)) >= 0) {
                size_t len = (size_t)n;
                if (len && line[len - 1] == '\n')
                        line[--len] = '\0';
                reader_line(rd, line, len);
        }
        return 0;
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "wall 118 ms, cpu 30 ms, mem_peak 14.2 MiB, pids_peak 3" */
static void print_usage(struct sbx_buf *b, json_object *end)
{
        int64_t v;

        if (jint(end, "wall_ms", &v))
                (void)sbx_buf_printf(b, "wall %lld ms", (long long)v);
        if (jint(end, "cpu_us", &v))
                (void)sbx_buf_printf(b, ", cpu %lld ms", (long long)(v / 1000));
        if (jint(end, "mem_peak_bytes", &v))
                (void)sbx_buf_printf(b, ", mem_peak %.1f MiB", (double)v / (1024.0 * 1024.0));
        if (jint(end, "pids_peak", &v))
                (void)sbx_buf_printf(b, ", pids_peak %lld", (long long)v);
}

/* The first line of the code, at most 60 characters, escaped. */
static void print_first_line(struct sbx_buf *b, json_object *rec)
{
        size_t len = 0, i = 0, chars = 0;
        const char *code = jstr(rec, "code", &len);
        bool more;

        if (!code) {
                (void)sbx_buf_puts(b, "(no code)");
                return;
        }
        while (i < len && code[i] == '\n')
                i++; /* skip leading blank lines */
        size_t start = i;
        while (i < len && code[i] != '\n' && chars < 60) {
                int l = sbx_utf8_decode(code + i, len - i, NULL);
                i += l > 0 ? (size_t)l : 1;
                chars++;
        }
        more = i < len;
        sb_term(b, code + start, i - start);
        if (more)
                (void)sbx_buf_puts(b, " ...");
}

static void print_call(struct sbx_buf *b, const struct audit_call *c)
{
        json_object *first = c->start ? c->start : c->blocked ? c->blocked : c->end;
        const char *s;
        size_t len;
        int64_t v;

        s = jstr(first, "time", &len);
        sb_term(b, s ? s : "?", s ? len : 1);
        (void)sbx_buf_puts(b, "  ");
        s = jstr(c->start ? c->start : c->blocked, "language", &len);
        sb_term(b, s ? s : "?", s ? len : 1);
        (void)sbx_buf_puts(b, "  ");
        if (c->blocked) {
                (void)sbx_buf_puts(b, "blocked: ");
                s = jstr(c->blocked, "reason", &len);
                sb_term(b, s ? s : "", s ? (len > 100 ? 100 : len) : 0);
                if (s && len > 100)
                        (void)sbx_buf_puts(b, " ...");
        } else if (!c->end) {
                (void)sbx_buf_puts(b, "no end");
        } else {
                s = jstr(c->end, "outcome", &len);
                sb_term(b, s ? s : "?", s ? len : 1);
                if (jint(c->end, "exit_code", &v))
                        (void)sbx_buf_printf(b, " (exit code %lld)", (long long)v);
                else if ((s = jstr(c->end, "signal_name", &len))) {
                        (void)sbx_buf_puts(b, " (");
                        sb_term(b, s, len);
                        (void)sbx_buf_puts(b, ")");
                }
                if (!c->start)
                        (void)sbx_buf_puts(b, ", start record missing");
                (void)sbx_buf_puts(b, "  ");
                print_usage(b, c->end);
                s = jstr(c->end, "isolation", &len);
                (void)sbx_buf_puts(b, "  isolation: ");
                sb_term(b, s ? s : "?", s ? len : 1);
                s = jstr(c->end, "blocked_syscalls", &len);
                if (s && len) {
                        (void)sbx_buf_puts(b, "  blocked syscalls: ");
                        sb_term(b, s, len);
                }
        }
        if (c->start || c->blocked) {
                (void)sbx_buf_puts(b, "  | ");
                print_first_line(b, c->start ? c->start : c->blocked);
        }
        (void)sbx_buf_puts(b, "\n");
}

static void print_call_json(struct sbx_buf *b, const struct audit_call *c)
{
        json_object *first = c->start ? c->start : c->blocked ? c->blocked : c->end;
        size_t len = 0;
        const char *id = jstr(first, "id", &len);

        (void)sbx_buf_puts(b, "{\"id\":");
        sb_json_ascii_str(b, id ? id : "", id ? len : 0);
        (void)sbx_buf_puts(b, ",\"status\":");
        (void)sbx_buf_puts(b, c->blocked  ? "\"blocked\""
                              : !c->end   ? "\"no end\""
                              : !c->start ? "\"no start\""
                                          : "\"ended\"");
        if (c->start) {
                (void)sbx_buf_puts(b, ",\"start\":");
                sb_json_ascii(b, c->start);
        }
        if (c->end) {
                (void)sbx_buf_puts(b, ",\"end\":");
                sb_json_ascii(b, c->end);
        }
        if (c->blocked) {
                (void)sbx_buf_puts(b, ",\"blocked\":");
                sb_json_ascii(b, c->blocked);
        }
        (void)sbx_buf_puts(b, "}\n");
}

static int write_all(int fd, const char *s, size_t n, struct sbx_error *err)
{
        while (n > 0) {
                ssize_t w = write(fd, s, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return sbx_fail(err, errno, "cannot write the audit listing: %s",
                                        strerror(errno));
                s += w;
                n -= (size_t)w;
        }
        return 0;
}

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

int audit_print(const char *dir, unsigned n, bool json, int out_fd, struct sbx_error *err)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct audit_reader rd = {0};
        struct sbx_buf b = {0}, shown = {0};
        char **names = NULL;
        size_t n_names = 0, cap_names = 0, unreadable = 0, from;
        struct dirent *de;
        int r = 0;

        sb_term(&shown, dir, strlen(dir));
        d = opendir(dir);
        if (!d) {
                int e = errno;
                if (e == ENOENT) {
                        if (!json)
                                (void)sbx_buf_printf(&b,
                                                     "no audit records yet: '%s' does not exist "
                                                     "(VESTIBULE_AUDIT_DIR)\n",
                                                     shown.data);
                        r = write_all(out_fd, b.data ? b.data : "", b.len, err);
                        sbx_buf_done(&b);
                        sbx_buf_done(&shown);
                        return r;
                }
                r = sbx_fail(err, e, "cannot read the audit folder '%s': %s", shown.data,
                             strerror(e));
                sbx_buf_done(&shown);
                return r;
        }
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l <= 6 || strcmp(de->d_name + l - 6, ".jsonl") != 0 || de->d_name[0] == '.')
                        continue;
                if (n_names == cap_names) {
                        cap_names = cap_names ? cap_names * 2 : 32;
                        names = xrealloc(names, cap_names * sizeof(*names));
                }
                names[n_names++] = xstrdup(de->d_name);
        }
        if (n_names)
                qsort(names, n_names, sizeof(*names), name_cmp);

        rd.records = json_object_new_array();
        rd.by_id = json_object_new_object();
        for (size_t i = 0; i < n_names; i++) {
                if (reader_file(&rd, dirfd(d), names[i]) < 0)
                        unreadable++;
                free(names[i]);
        }
        free(names);

        from = n && rd.n_calls > n ? rd.n_calls - n : 0;
        for (size_t i = from; i < rd.n_calls; i++) {
                if (json)
                        print_call_json(&b, &rd.calls[i]);
                else
                        print_call(&b, &rd.calls[i]);
        }
        if (!json) {
                if (rd.n_calls == 0)
                        (void)sbx_buf_printf(&b, "no audit records yet in '%s'\n", shown.data);
                if (rd.corrupt || unreadable)
                        (void)sbx_buf_printf(
                            &b,
                            "(skipped %zu unreadable line%s and %zu unreadable file%s "
                            "in '%s')\n",
                            rd.corrupt, rd.corrupt == 1 ? "" : "s", unreadable,
                            unreadable == 1 ? "" : "s", shown.data);
        } else if (rd.corrupt || unreadable)
                log_warning("skipped %zu unreadable lines and %zu unreadable files in '%s'",
                            rd.corrupt, unreadable, shown.data);

        r = write_all(out_fd, b.data ? b.data : "", b.len, err);
        sbx_buf_done(&b);
        sbx_buf_done(&shown);
        free(rd.calls);
        json_object_put(rd.records);
        json_object_put(rd.by_id);
        return r;
}
