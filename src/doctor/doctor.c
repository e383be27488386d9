/* doctor.c - every prerequisite of each backend, checked with its value, the real probes, and
 * what auto picks. See doctor.h. */
#include "doctor/doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <seccomp.h>
#include "lazy/sdbus.h"

#include "common/apparmor.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/rundir.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "gvisor/gvisor.h"
#include "native/backend.h"
#include "service/ladder.h"
#include "service/service.h"
#include "setup/pins.h"
#include "setup/setup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

__attribute__((format(printf, 5, 6))) static void add(struct doctor_check *list, size_t *n,
                                                      enum doctor_status st, const char *name,
                                                      const char *fmt, ...)
{
        struct doctor_check *c;
        va_list ap;

        if (*n >= DOCTOR_MAX_CHECKS)
                return;
        c = &list[(*n)++];
        c->status = st;
        snprintf(c->name, sizeof(c->name), "%s", name);
        va_start(ap, fmt);
        vsnprintf(c->value, sizeof(c->value), fmt, ap);
        va_end(ap);
}

/* The first line of a small file, without its newline; -errno when unreadable. */
static int read_line(const char *path, char *buf, size_t size)
{
        ssize_t n =
            sbx_read_small_file(AT_FDCWD, path, SBX_READ_FIRST_LINE | SBX_READ_PREFIX, buf, size);

        return n < 0 ? (int)n : 0;
}

/* ---- native ----------------------------------------------------------------------------- */

static void check_kernel(struct doctor_backend *b)
{
        struct utsname u;
        int ma = 0, mi = 0;

        if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "kernel", "cannot read the version");
                return;
        }
        if (ma > 5 || (ma == 5 && mi >= 9))
                add(b->checks, &b->n_checks, DOCTOR_OK, "kernel", "Linux %s (5.9 or later needed)",
                    u.release);
        else
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "kernel",
                    "Linux %s: native needs 5.9 or later: upgrade the kernel, or use the container "
                    "backend",
                    u.release);
}

static void check_userns(struct doctor_backend *b)
{
        char max[32] = "", aa[32] = "", clone_[32] = "";
        bool have_aa = read_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", aa,
                                 sizeof(aa)) == 0;
        bool have_clone =
            read_line("/proc/sys/kernel/unprivileged_userns_clone", clone_, sizeof(clone_)) == 0;
        bool have_max = read_line("/proc/sys/user/max_user_namespaces", max, sizeof(max)) == 0;
        enum doctor_status st = DOCTOR_OK;
        char fix[200] = "", why[sizeof(b->probe.blocked)];

        /* The same check a run makes (a real clone into new namespaces), so doctor and runs
         * agree: a container's seccomp profile refuses them while the sysctls allow them, and
         * under Ubuntu's restriction our AppArmor profile allows them (check "apparmor"). */
        if (native_userns_check(why, sizeof(why)) < 0) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "user namespaces", "%s", why);
                return;
        }
        if (have_max && atol(max) == 0) {
                st = DOCTOR_FAIL;
                snprintf(fix, sizeof(fix),
                         ": user namespaces are disabled: sudo sysctl "
                         "user.max_user_namespaces=15000");
        } else if (have_clone && atol(clone_) == 0) {
                st = DOCTOR_FAIL;
                snprintf(fix, sizeof(fix), ": sudo sysctl kernel.unprivileged_userns_clone=1");
        }
        add(b->checks, &b->n_checks, st, "user namespaces",
            "user.max_user_namespaces=%s, kernel.apparmor_restrict_unprivileged_userns=%s%s%s%s",
            have_max ? max : "(absent)",
            have_aa ? (atol(aa) ? "1 (allowed here: this process's AppArmor profile grants userns)"
                                : aa)
                    : "(absent: not an Ubuntu kernel)",
            have_clone ? ", kernel.unprivileged_userns_clone=" : "", have_clone ? clone_ : "", fix);
}

/* @c's value, cut at its size (a path may be long). */
__attribute__((format(printf, 2, 3))) static void set_value(struct doctor_check *c, const char *fmt,
                                                            ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->value, sizeof(c->value), fmt, ap);
        va_end(ap);
}

void doctor_apparmor_check(const struct sbx_apparmor *a, struct doctor_check *ret)
{
        char fix[PATH_MAX + 64];

        memset(ret, 0, sizeof(*ret));
        snprintf(ret->name, sizeof(ret->name), "apparmor profile");
        sbx_apparmor_fix(a, fix, sizeof(fix));
        if (a->attached) {
                ret->status = DOCTOR_OK;
                set_value(ret, "loaded: this process runs as '%s' (%s grants userns only)",
                          a->label, a->file);
        } else if (a->restrict_userns != 1) {
                ret->status = DOCTOR_INFO;
                set_value(ret, "not needed here: %s; %s %s%s",
                          a->running
                              ? "AppArmor runs, but kernel.apparmor_restrict_unprivileged_userns "
                                "is absent or 0"
                              : "AppArmor is not running",
                          a->file, a->file_exists ? "is installed" : "is not installed",
                          a->loaded == 1 ? " and loaded" : "");
        } else {
                ret->status = DOCTOR_FAIL;
                set_value(ret,
                          "kernel.apparmor_restrict_unprivileged_userns=1 and this process runs "
                          "as '%s', not under %s (%s%s%s): %s, then restart the server",
                          a->label[0] ? a->label : "unconfined", a->name,
                          a->file_exists ? "installed at " : "not installed at ", a->file,
                          a->loaded == 1 ? ", loaded, but not applied to this process: it started "
                                           "before the profile was loaded, or the profile names "
                                           "another path"
                          : a->loaded == 0 ? ", not loaded"
                                           : "",
                          fix);
        }
}

static void check_apparmor(struct doctor_backend *b)
{
        _cleanup_free_ struct sbx_apparmor *a = xmalloc(sizeof(*a));

        if (b->n_checks >= DOCTOR_MAX_CHECKS)
                return;
        sbx_apparmor_read("", a);
        doctor_apparmor_check(a, &b->checks[b->n_checks++]);
}

static void check_landlock(struct doctor_backend *b)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        int e = errno;

        if (abi > 0)
                add(b->checks, &b->n_checks, DOCTOR_OK, "landlock", "ABI %ld", abi);
        else
                add(b->checks, &b->n_checks, DOCTOR_WARN, "landlock",
                    "not available (%s): writes are confined by the mounts alone; enable "
                    "CONFIG_SECURITY_LANDLOCK and lsm=landlock,... on the kernel command line",
                    e == EOPNOTSUPP ? "disabled at boot" : strerror(e));
}

static void check_seccomp(struct doctor_backend *b)
{
        const struct scmp_version *v = seccomp_version();
        unsigned action = SECCOMP_RET_USER_NOTIF;
        long r;

        if (v && (v->major > 2 || (v->major == 2 && v->minor >= 5)))
                add(b->checks, &b->n_checks, DOCTOR_OK, "libseccomp", "%u.%u.%u", v->major,
                    v->minor, v->micro);
        else
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "libseccomp",
                    "%u.%u.%u: 2.5 or later is needed (user notification): install libseccomp2 "
                    "2.5+",
                    v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0);
        r = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
        if (r == 0)
                add(b->checks, &b->n_checks, DOCTOR_OK, "seccomp user notification",
                    "available (blocked calls are reported by name)");
        else
                add(b->checks, &b->n_checks, DOCTOR_WARN, "seccomp user notification",
                    "not available (%s): blocked calls fail but are not reported (Linux 5.0+)",
                    strerror(errno));
}

/* The v2 hierarchy's mount point, and whether it is the unified one. */
static const char *cgroup2_root(bool *ret_unified)
{
        struct statfs s;

        *ret_unified = false;
        if (statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC) {
                *ret_unified = true;
                return "/sys/fs/cgroup";
        }
        if (statfs("/sys/fs/cgroup/unified", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC)
                return "/sys/fs/cgroup/unified";
        return NULL;
}

static void check_cgroup(struct doctor_backend *b, bool *ret_unified)
{
        bool unified = false;
        const char *root = cgroup2_root(&unified);
        char line[512], own[512] = "", ctrls[256] = "";
        _cleanup_free_ char *path = NULL;
        FILE *f;

        *ret_unified = unified;
        f = fopen("/proc/self/cgroup", "re");
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        snprintf(own, sizeof(own), "%s", line + 3);
                }
        if (f)
                fclose(f);
        if (!root) {
                add(b->checks, &b->n_checks, DOCTOR_WARN, "cgroup v2",
                    "no cgroup v2 hierarchy mounted (v1 only): runs get no memory or cpu cap; "
                    "boot with systemd.unified_cgroup_hierarchy=1");
                return;
        }
        path = xasprintf("%s%s/cgroup.controllers", root, own);
        if (read_line(path, ctrls, sizeof(ctrls)) < 0)
                snprintf(ctrls, sizeof(ctrls), "(unreadable)");
        add(b->checks, &b->n_checks, unified && strstr(ctrls, "memory") ? DOCTOR_OK : DOCTOR_WARN,
            "cgroup v2", "%s at %s; this process's cgroup '%s' has controllers: %s%s",
            unified ? "unified hierarchy" : "hybrid (v1 controllers, v2 without them)", root,
            own[0] ? own : "?", ctrls[0] ? ctrls : "none",
            unified ? ""
                    : ": memory/cpu caps need the unified hierarchy "
                      "(systemd.unified_cgroup_hierarchy=1)");
}

static void check_user_bus(const struct sbx_config *cfg, struct doctor_backend *b, bool unified)
{
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        static const char *const busctl[] = {"/usr/bin/busctl", "/bin/busctl"};
        const struct sbx_engine_env *env = &cfg->engine_env;
        const char *found = NULL;
        const char *from = env->user_bus_address  ? "DBUS_SESSION_BUS_ADDRESS"
                           : env->xdg_runtime_dir ? "XDG_RUNTIME_DIR"
                                                  : "/run/user, checked: the client passed no "
                                                    "DBUS_SESSION_BUS_ADDRESS or XDG_RUNTIME_DIR";
        char ctrls[256] = "", address[4200];
        struct sbx_error lib_err = {0}, e = {0};
        int r;

        if (lazy_sdbus_load(&lib_err) < 0)
                add(b->checks, &b->n_checks, DOCTOR_WARN, "systemd user bus",
                    "not usable: %s; no transient scope per run", lib_err.msg);
        else if (sbx_user_bus_resolve(env->user_bus_address, env->xdg_runtime_dir, geteuid(),
                                      address, sizeof(address), &e) < 0)
                add(b->checks, &b->n_checks, DOCTOR_WARN, "systemd user bus",
                    "not found (%s; from %s): no transient scope per run; log in through "
                    "systemd (loginctl enable-linger $USER) so the user manager runs",
                    e.msg, from);
        else if ((r = lazy_sd_bus_open_address(address, &bus)) < 0) {
                add(b->checks, &b->n_checks, DOCTOR_WARN, "systemd user bus",
                    "not reachable at '%s' (%s; from %s): no transient scope per run; log in "
                    "through systemd (loginctl enable-linger $USER) so the user manager runs",
                    address, strerror(-r), from);
        } else {
                _cleanup_free_ char *p = xasprintf(
                    "/sys/fs/cgroup/user.slice/user-%u.slice/user@%u.service/cgroup.controllers",
                    (unsigned)getuid(), (unsigned)getuid());
                if (!unified || read_line(p, ctrls, sizeof(ctrls)) < 0)
                        snprintf(ctrls, sizeof(ctrls), "unknown (no unified hierarchy)");
                add(b->checks, &b->n_checks,
                    strstr(ctrls, "memory") && strstr(ctrls, "cpu") && strstr(ctrls, "pids")
                        ? DOCTOR_OK
                        : DOCTOR_WARN,
                    "systemd user bus",
                    "reachable at '%s' (from %s); controllers delegated to user@%u.service: %s",
                    address, from, (unsigned)getuid(), ctrls[0] ? ctrls : "none");
        }
        for (size_t i = 0; i < ELEMENTSOF(busctl) && !found; i++)
                if (access(busctl[i], X_OK) == 0)
                        found = busctl[i];
        add(b->checks, &b->n_checks, found ? DOCTOR_OK : DOCTOR_INFO, "busctl", "%s",
            found ? found : "not installed (not needed: the server talks sd-bus itself)");
}

/* The image variant images/build.sh wrote into @dir/etc/vestibule/variant ("python",
 * "python-data", "node"), as a word of [a-z-] only; "" when absent (an older recipe or
 * another origin). */
static void rootfs_variant(const char *dir, char *buf, size_t size)
{
        _cleanup_free_ char *p = xasprintf("%s/etc/vestibule/variant", dir);

        if (sbx_read_small_file(AT_FDCWD, p,
                                SBX_READ_NOFOLLOW | SBX_READ_FIRST_LINE | SBX_READ_PREFIX, buf,
                                size) <= 0)
                return;
        for (char *c = buf; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || *c == '-')) {
                        buf[0] = '\0';
                        return;
                }
}

static void check_rootfs(struct doctor_backend *b, const struct sbx_config *cfg,
                         const struct setup_pins *pins, bool have_pins, const char *lang,
                         const char *exe)
{
        _cleanup_free_ char *dir = xasprintf("%s/%s", cfg->rootfs_dir, lang);
        _cleanup_free_ char *bin = xasprintf("%s/usr/bin/%s", dir, exe);
        _cleanup_free_ char *bash = xasprintf("%s/usr/bin/bash", dir);
        _cleanup_free_ char *ident = NULL, *recipe = NULL;
        _cleanup_free_ char *name = xasprintf("rootfs %s", lang);
        struct sbx_error err = {0};
        struct stat st;
        int r;

        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, name,
                    "'%s' is missing: run `vestibule-mcp setup` (with the same "
                    "VESTIBULE_ROOTFS_DIR), then retry",
                    dir);
                return;
        }
        if (lstat(bin, &st) < 0 || lstat(bash, &st) < 0) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, name,
                    "'%s' lacks /usr/bin/%s or /usr/bin/bash: run `vestibule-mcp setup --force`, "
                    "then retry",
                    dir, exe);
                return;
        }
        r = setup_installed_identity(cfg->rootfs_dir, lang, &ident, &recipe, &err);
        if (r == -ENOENT) {
                add(b->checks, &b->n_checks, DOCTOR_WARN, name,
                    "'%s' present with %s, but not installed by `vestibule-mcp setup` (no "
                    "%s.json): its origin and pin cannot be checked; run `vestibule-mcp setup` "
                    "to record them",
                    dir, exe, lang);
                return;
        }
        if (r < 0) {
                add(b->checks, &b->n_checks, DOCTOR_WARN, name, "'%s' present; its record: %s", dir,
                    err.msg);
                return;
        }
        char variant[32];
        rootfs_variant(dir, variant, sizeof(variant));
        _cleanup_free_ char *shown_variant =
            strcmp(variant, "python-data") == 0
                ? xstrdup(", variant python-data (numpy, pandas, matplotlib, scipy)")
            : variant[0] ? xasprintf(", variant %s", variant)
                         : xstrdup("");
        /* the data variant's record is "<recipe> python-data" */
        size_t rlen = recipe ? strcspn(recipe, " ") : 0;
        if (recipe && have_pins && pins->debian_recipe &&
            (strlen(pins->debian_recipe) != rlen ||
             strncmp(recipe, pins->debian_recipe, rlen) != 0))
                add(b->checks, &b->n_checks, DOCTOR_WARN, name,
                    "'%s' built by recipe %s, but images/pins now says %s: run `vestibule-mcp "
                    "setup --from-debian --force` to rebuild it",
                    dir, recipe, pins->debian_recipe);
        else
                add(b->checks, &b->n_checks, DOCTOR_OK, name,
                    "'%s' with %s, installed from %s%s%.*s%s", dir, exe, ident,
                    recipe ? ", recipe " : "", (int)rlen, recipe ? recipe : "", shown_variant);
}

static void native_checks(const struct sbx_config *cfg, const struct setup_pins *pins,
                          bool have_pins, struct doctor_backend *b)
{
        bool unified = false;

        check_kernel(b);
        check_userns(b);
        check_apparmor(b);
        check_landlock(b);
        check_seccomp(b);
        check_cgroup(b, &unified);
        check_user_bus(cfg, b, unified);
        check_rootfs(b, cfg, pins, have_pins, "python", "python3");
        check_rootfs(b, cfg, pins, have_pins, "node", "node");
}

/* ---- container -------------------------------------------------------------------------- */

static json_object *jget(json_object *o, const char *k)
{
        json_object *v = NULL;

        return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static const char *jstr(json_object *o, const char *k)
{
        const char *s = json_object_get_string(jget(o, k));

        return s ? s : "?";
}

static void check_image(struct doctor_backend *b, const struct engine_conn *c, const char *lang,
                        const char *ref, const char *pin_registry, const char *pin_debian)
{
        _cleanup_free_ char *name = xasprintf("image %s", lang);
        struct sbx_error err = {0};
        char mark[8] = "", tar[80] = "";
        const char *pin =
            !ref                                             ? "unset"
            : pin_registry && strcmp(ref, pin_registry) == 0 ? "the pinned registry digest"
            : pin_debian && strcmp(ref, pin_debian) == 0     ? "the pinned Debian-built image"
                                                             : NULL;

        if (!ref || engine_image_label(c, ref, "vestibule.image", mark, sizeof(mark), &err) < 0) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, name, "%s",
                    err.msg[0] ? err.msg : "no image is set");
                return;
        }
        (void)engine_image_label(c, ref, "vestibule.tar-sha256", tar, sizeof(tar), &err);
        if (!pin)
                add(b->checks, &b->n_checks, DOCTOR_WARN, name,
                    "'%s' present, but it is not one of images/pins (an override): its contents "
                    "are whatever that name holds now",
                    ref);
        else
                add(b->checks, &b->n_checks, DOCTOR_OK, name, "'%s' present (%s%s%s)", ref, pin,
                    tar[0] ? ", imported from tar sha256 " : "", tar);
}

/* A unix socket whose daemon cannot see this machine's files (Docker Desktop, podman machine,
 * a daemon of another host name) takes the volume path as a tcp:// endpoint does; say so, with
 * the server's own rule (engine_daemon_shares_files(), src/engine/volume.c). */
static void check_files_shared(struct doctor_backend *b, const struct engine_conn *c,
                               json_object *info)
{
        char host[256] = "", why[300] = "";

        gethostname(host, sizeof(host) - 1);
        if (!c->ep.is_unix ||
            engine_daemon_shares_files(&c->ep, jstr(info, "OperatingSystem"), jstr(info, "Name"),
                                       host, why, sizeof(why)))
                return;
        add(b->checks, &b->n_checks, DOCTOR_INFO, "engine files",
            "%s: code and workspace go through volumes (the workspace is copied in and back each "
            "run; docs/remote-engines.md)",
            why);
}

static void container_checks(const struct sbx_config *cfg, const struct setup_pins *pins,
                             bool have_pins, struct doctor_backend *b)
{
        struct engine_conn c = {0};
        struct sbx_error err = {0};
        _cleanup_(engine_reply_done) struct engine_reply verr = {0}, infr = {0};
        bool rootless = false;

        if (engine_connect(cfg, NULL, &c, &err) < 0) {
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "engine endpoint", "%s", err.msg);
                return;
        }
        add(b->checks, &b->n_checks, DOCTOR_OK, "engine endpoint", "%s (%s)%s", c.ep.host,
            c.ep.origin,
            c.ep.is_unix ? ""
                         : ": not this machine's filesystem: code and workspace go through "
                           "volumes (the workspace is copied in and back each run)");
        /* A request that fails is shown with its reason: the probe below fails the same way,
         * and doctor must say why. */
        if (engine_get(&c,
                       &(struct engine_call){.path = "/version",
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "say its version"},
                       &verr, &err) == 0 &&
            verr.json)
                add(b->checks, &b->n_checks, DOCTOR_OK, "engine version",
                    "%s %s, API %s (using %s)", c.podman ? "Podman" : "Docker Engine",
                    jstr(verr.json, "Version"), jstr(verr.json, "ApiVersion"), c.api);
        else
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "engine version", "GET /version: %s",
                    err.msg[0] ? err.msg : "no answer");
        memset(&err, 0, sizeof(err));
        if (engine_get(&c,
                       &(struct engine_call){.path = "/info",
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "say what it enforces (/info)"},
                       &infr, &err) != 0 ||
            !infr.json)
                add(b->checks, &b->n_checks, DOCTOR_FAIL, "engine mode", "GET /info: %s",
                    err.msg[0] ? err.msg : "no answer");
        else {
                json_object *so = jget(infr.json, "SecurityOptions");
                char opts[200] = "";

                for (size_t i = 0; so && i < json_object_array_length(so); i++) {
                        const char *s = json_object_get_string(json_object_array_get_idx(so, i));
                        size_t n = strlen(opts);

                        if (s && strstr(s, "name=rootless"))
                                rootless = true;
                        if (s)
                                snprintf(opts + n, sizeof(opts) - n, "%s%s", n ? " " : "", s);
                }
                if (c.podman && geteuid() != 0)
                        rootless = true; /* a Podman socket a user can open is its own */
                add(b->checks, &b->n_checks, DOCTOR_INFO, "engine mode",
                    "%s, cgroup v%s (driver %s), security options: %s",
                    rootless ? "rootless" : "rootful", jstr(infr.json, "CgroupVersion"),
                    jstr(infr.json, "CgroupDriver"), opts[0] ? opts : "none");
                if (!rootless && !c.podman && geteuid() != 0)
                        add(b->checks, &b->n_checks, DOCTOR_WARN, "engine access",
                            "this user can open a rootful Docker socket: that is root-equivalent "
                            "on this machine (rootless Docker or Podman avoid it)");
                check_files_shared(b, &c, infr.json);
        }
        check_image(b, &c, "python", engine_image_for(cfg, "python"),
                    have_pins ? pins->python_registry : NULL,
                    have_pins ? pins->python_debian : NULL);
        check_image(b, &c, "node", engine_image_for(cfg, "node"),
                    have_pins ? pins->node_registry : NULL, have_pins ? pins->node_debian : NULL);
}

/* ---- gvisor --------------------------------------------------------------------------- */

/* runsc found (and its version), the platform, and the probe's real rootless run. */
static void gvisor_checks(struct doctor_backend *b)
{
        struct gvisor_runsc_facts f;
        struct sbx_error err = {0};
        const char *line, *probe_line;

        if (gvisor_runsc_facts(&f, &err) < 0) {
                add(b->checks, &b->n_checks, f.found ? DOCTOR_FAIL : DOCTOR_WARN, "runsc", "%s",
                    err.msg);
                return;
        }
        add(b->checks, &b->n_checks, DOCTOR_OK, "runsc", "%s, version %s", f.path, f.version);
        add(b->checks, &b->n_checks, DOCTOR_INFO, "runsc platform", "%s", f.platform);
        /* the probe's own line (gvisor_probe() fills it): a real `runsc run` of uname -r */
        line = strstr(b->probe.details, "runsc rootless probe: ");
        if (!line)
                return;
        probe_line = line + strlen("runsc rootless probe: ");
        add(b->checks, &b->n_checks, b->probe.usable ? DOCTOR_OK : DOCTOR_FAIL,
            "runsc rootless probe", "%.*s", (int)strcspn(probe_line, "\n"), probe_line);
}

/* ---- probes and the pick ---------------------------------------------------------------- */

static void probe_backend(const struct sbx_config *cfg, backend_ctor_fn ctor,
                          struct doctor_backend *b)
{
        struct backend *be = NULL;
        struct sbx_error err = {0};

        b->tried = true;
        if (ctor(cfg, &be, &err) < 0 || !be) {
                snprintf(b->probe.blocked, sizeof(b->probe.blocked), "%s",
                         err.msg[0] ? err.msg : "the backend could not be created");
                return;
        }
        if (be->ops->probe(be, &b->probe, &err) < 0) {
                b->probe.usable = false;
                snprintf(b->probe.blocked, sizeof(b->probe.blocked), "%s", err.msg);
        }
        backend_free(be);
}

/* What auto picks (ladder_decide_all(), the ladder's own rule) from the three probes; NULL
 * with r->blocked filled when none is usable. */
static const struct doctor_backend *auto_pick(struct doctor_report *r)
{
        switch (ladder_decide_all(r->gvisor.tried ? &r->gvisor.probe : NULL,
                                  r->native.tried ? &r->native.probe : NULL, &r->container.probe)) {
        case LADDER_CHOICE_GVISOR:
                return &r->gvisor;
        case LADDER_CHOICE_NATIVE:
                return &r->native;
        case LADDER_CHOICE_CONTAINER:
                return &r->container;
        case LADDER_CHOICE_NONE:
        default:
                ladder_blocked_text(r->blocked, sizeof(r->blocked),
                                    r->native.tried ? &r->native.probe : NULL, &r->container.probe);
                return NULL;
        }
}

int doctor_collect(const struct sbx_config *cfg, struct doctor_report *ret)
{
        struct doctor_report *r = ret;
        struct setup_pins pins = {0};
        struct sbx_error err = {0};
        bool have_pins;

        memset(r, 0, sizeof(*r));
        r->native.name = "native";
        r->container.name = "container";
        r->gvisor.name = "gvisor";
        r->backend_setting = config_backend_name(cfg->backend);

        if (cfg->invalid)
                add(r->host, &r->n_host, DOCTOR_FAIL, "settings", "%s", cfg->invalid_msg);
        else
                add(r->host, &r->n_host, DOCTOR_OK, "settings",
                    "valid: backend=%s, runtime=%s/%s, rootfs '%s', workspace '%s'%s%s",
                    config_backend_name(cfg->backend), config_runtime_name(cfg->runtime),
                    cfg->container_runtime ?: "default", cfg->rootfs_dir, cfg->workspace_dir,
                    cfg->config_file ? ", file " : "", cfg->config_file ? cfg->config_file : "");
        if (geteuid() == 0 && (!cfg->run_as_set || cfg->run_as_uid == 0))
                add(r->host, &r->n_host, DOCTOR_FAIL, "user", "%s", RUN_SERVICE_ROOT_BLOCKED);
        else if (geteuid() == 0)
                add(r->host, &r->n_host, DOCTOR_INFO, "user", "root; code runs as %u:%u",
                    (unsigned)cfg->run_as_uid, (unsigned)cfg->run_as_gid);
        else
                add(r->host, &r->n_host, DOCTOR_OK, "user", "uid %u (code runs as this user)",
                    (unsigned)geteuid());
        have_pins = setup_pins_load(&pins, &err) == 0;
        if (!have_pins)
                add(r->host, &r->n_host, DOCTOR_WARN, "pins", "%s", err.msg);

        if (ladder_native_supported()) {
                native_checks(cfg, &pins, have_pins, &r->native);
                probe_backend(cfg, native_backend_new, &r->native);
        } else {
                snprintf(r->native.probe.blocked, sizeof(r->native.probe.blocked),
                         "not tried: native isolation exists only on Linux");
        }
        container_checks(cfg, &pins, have_pins, &r->container);
        probe_backend(cfg, engine_backend_new, &r->container);
        if (ladder_native_supported()) {
                probe_backend(cfg, gvisor_backend_new, &r->gvisor);
                gvisor_checks(&r->gvisor);
        } else {
                snprintf(r->gvisor.probe.blocked, sizeof(r->gvisor.probe.blocked),
                         "not tried: gVisor runs only on Linux");
        }
        if (have_pins)
                setup_pins_done(&pins);

        const struct doctor_backend *pick = NULL;
        switch (cfg->backend) {
        case SBX_BACKEND_NATIVE:
                pick = &r->native;
                break;
        case SBX_BACKEND_CONTAINER:
                pick = &r->container;
                break;
        case SBX_BACKEND_GVISOR:
                pick = &r->gvisor;
                break;
        case SBX_BACKEND_NAIVE:
                r->usable = !cfg->invalid;
                r->picked = "naive";
                snprintf(r->grade, sizeof(r->grade),
                         "none (VESTIBULE_BACKEND=naive: development only, no isolation)");
                break;
        case SBX_BACKEND_AUTO:
        default:
                pick = auto_pick(r);
                break;
        }
        if (pick && pick->probe.usable) {
                r->usable = true;
                r->picked = pick->name;
                snprintf(r->grade, sizeof(r->grade), "%s", pick->probe.grade);
        } else if (pick) {
                snprintf(r->blocked, sizeof(r->blocked), "%.990s (VESTIBULE_BACKEND=%s)",
                         pick->probe.blocked, pick->name);
        }
        /* Nothing runs with an invalid setting or as root, whatever the backends say. */
        for (size_t i = 0; i < r->n_host; i++)
                if (r->host[i].status == DOCTOR_FAIL) {
                        r->usable = false;
                        r->picked = NULL;
                        r->grade[0] = '\0';
                        snprintf(r->blocked, sizeof(r->blocked), "%s", r->host[i].value);
                        break;
                }
        return 0;
}

/* ---- output ----------------------------------------------------------------------------- */

static const char *status_word(enum doctor_status s)
{
        switch (s) {
        case DOCTOR_OK:
                return "ok";
        case DOCTOR_INFO:
                return "info";
        case DOCTOR_WARN:
                return "warn";
        case DOCTOR_FAIL:
        default:
                return "FAIL";
        }
}

/* @prefix, then @s escaped for the terminal, then @suffix. What doctor prints comes partly
 * from outside: the engine's /info (Version, CgroupVersion, SecurityOptions), image labels,
 * paths from the settings. None of it may drive the terminal (issue 12, finding 26). */
static void put_safe(FILE *out, const char *prefix, const char *s, const char *suffix)
{
        _cleanup_free_ char *e = sbx_term_escape(s, s ? strlen(s) : 0, false);

        fprintf(out, "%s%s%s", prefix, e, suffix);
}

static void print_checks(const struct doctor_check *c, size_t n, FILE *out)
{
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = sbx_term_escape(c[i].name, strlen(c[i].name), false);
                fprintf(out, "  [%-4s] %-26s ", status_word(c[i].status), name);
                put_safe(out, "", c[i].value, "\n");
        }
}

static void print_backend(const struct doctor_backend *b, FILE *out)
{
        put_safe(out, "\n", b->name, " backend:\n");
        print_checks(b->checks, b->n_checks, out);
        if (!b->tried)
                put_safe(out, "  => not tried: ", b->probe.blocked, "\n");
        else if (b->probe.usable)
                put_safe(out, "  => would give: isolation: ", b->probe.grade, "\n");
        else
                put_safe(out, "  => Blocked: ", b->probe.blocked, "\n");
}

void doctor_print(const struct doctor_report *r, FILE *out)
{
        fprintf(out, "vestibule-mcp doctor\n\nhost:\n");
        print_checks(r->host, r->n_host, out);
        print_backend(&r->native, out);
        print_backend(&r->container, out);
        print_backend(&r->gvisor, out);
        put_safe(out, "\nVESTIBULE_BACKEND=", r->backend_setting, " picks: ");
        if (r->usable) {
                put_safe(out, "", r->picked, ", ");
                put_safe(out, "isolation: ", r->grade, "\n");
        } else {
                put_safe(out, "nothing. Blocked: ", r->blocked, "\n");
        }
}

static json_object *checks_json(const struct doctor_check *c, size_t n)
{
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_new_object();

                json_object_object_add(o, "name", json_object_new_string(c[i].name));
                json_object_object_add(o, "status",
                                       json_object_new_string(status_word(c[i].status)));
                json_object_object_add(o, "value", json_object_new_string(c[i].value));
                json_object_array_add(a, o);
        }
        return a;
}

static json_object *backend_json(const struct doctor_backend *b)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "tried", json_object_new_boolean(b->tried));
        json_object_object_add(o, "usable", json_object_new_boolean(b->probe.usable));
        json_object_object_add(o, "degraded", json_object_new_boolean(b->probe.degraded));
        json_object_object_add(o, "grade",
                               b->probe.usable ? json_object_new_string(b->probe.grade) : NULL);
        json_object_object_add(o, "blocked",
                               b->probe.usable ? NULL : json_object_new_string(b->probe.blocked));
        json_object_object_add(o, "checks", checks_json(b->checks, b->n_checks));
        return o;
}

json_object *doctor_json(const struct doctor_report *r)
{
        json_object *o = json_object_new_object(), *bs = json_object_new_object();
        json_object *pick = json_object_new_object();

        json_object_object_add(o, "host", checks_json(r->host, r->n_host));
        json_object_object_add(bs, "native", backend_json(&r->native));
        json_object_object_add(bs, "container", backend_json(&r->container));
        json_object_object_add(bs, "gvisor", backend_json(&r->gvisor));
        json_object_object_add(o, "backends", bs);
        json_object_object_add(pick, "setting", json_object_new_string(r->backend_setting));
        json_object_object_add(pick, "usable", json_object_new_boolean(r->usable));
        json_object_object_add(pick, "backend",
                               r->picked ? json_object_new_string(r->picked) : NULL);
        json_object_object_add(pick, "grade", r->usable ? json_object_new_string(r->grade) : NULL);
        json_object_object_add(pick, "blocked",
                               r->usable ? NULL : json_object_new_string(r->blocked));
        json_object_object_add(o, "pick", pick);
        return o;
}

int doctor_readiness_line(char *buf, size_t size)
{
        _cleanup_free_ struct doctor_report *r = xcalloc(1, sizeof(*r));
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};

        if (config_load(&cfg, &err) < 0) {
                snprintf(buf, size, "Blocked: %s", err.msg);
                return 1;
        }
        doctor_collect(cfg, r);
        config_free(cfg);
        if (r->usable) {
                snprintf(buf, size, "ready in this terminal's environment: isolation %s", r->grade);
                return 0;
        }
        snprintf(buf, size, "Blocked: %s", r->blocked);
        return 1;
}

int doctor_readiness_print(FILE *out)
{
        char line[1400];
        int r = doctor_readiness_line(line, sizeof(line));

        put_safe(out, "", line, "\n");
        return r;
}
