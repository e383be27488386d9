/* writer.c - the audit log's writer: records queued for one writer thread, appended to this
 * process's JSONL file and confirmed with fdatasync (the record builders are in record.c, the
 * reader in reader.c).
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
 * stderr line says so once. The reserve is given back when the log closes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit-internal.h"
#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

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
        bool proven;  /* a record was written and confirmed: until then, audit_failing() says
                       * the log is unproven (a folder full or unwritable at start-up) */
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
                        struct timespec until = sbx_deadline_ts(batch[n - 1]->batch_ms);
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
                        log->proven |= !log->failing;
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

struct audit_pending *audit_queue(struct audit_log *log, char *line, size_t len, unsigned batch_ms)
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

        p->deadline = sbx_deadline_ts(AUDIT_CONFIRM_TIMEOUT_MS);
        p->it = it;
        return p;
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
                        snprintf(note, note_size, "%s", AUDIT_NOTE_UNCONFIRMED);
        }
        item_unref_locked(it);
        pthread_mutex_unlock(&log->mu);
        free(p);
}

void audit_submit(struct audit_log *log, char *line, size_t len, char *note, size_t note_size)
{
        audit_pending_wait(audit_queue(log, line, len, 0), note, note_size);
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

/* In the server's OCI image, an audit folder on the container's own root filesystem (no volume
 * mounted there) goes with the container at `docker run --rm`: said once at start, naming the
 * mount install-client --docker writes (docs/packaging.md, "The server image"). The folder
 * may not exist yet: its nearest existing parent is compared with "/" (st_dev). */
static void warn_if_in_container(const struct sbx_config *cfg)
{
        _cleanup_free_ char *p = xstrdup(cfg->audit_dir);
        struct stat st, root;
        char *slash;

        if (!cfg->in_container || stat("/", &root) < 0)
                return;
        while (stat(p, &st) < 0 && (slash = strrchr(p, '/')) && slash != p)
                *slash = '\0';
        if (stat(p, &st) < 0 || st.st_dev != root.st_dev)
                return;
        log_warning("audit: the audit folder '%s' is inside this server's container and goes "
                    "with it (docker run --rm): mount a volume there, as install-client "
                    "--docker writes (-v vestibule-state:/var/lib/vestibule)",
                    cfg->audit_dir);
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
        warn_if_in_container(cfg);

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
        /* no record written yet: the first run waits for its own (a full disk at start-up) */
        if (!f && !log->proven) {
                f = true;
                if (why && why_size)
                        snprintf(why, why_size, "%s", AUDIT_WHY_UNPROVEN);
        }
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
