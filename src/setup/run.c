/* run.c - the setup command below its arguments: --from-tar, --from-debian (images/build.sh),
 * then the readiness check. No settings are read here (setup_main() does that). */
#include "setup/setup_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "gvisor/gvisor.h"
#include "setup/pins.h"
#include "setup/registry.h"
#include "setup/setup.h"
#include "setup/setup_internal.h"

/* The gvisor backend (src/gvisor/gvisor.h) needs runsc, from the package sources only: say so
 * when it is missing (nothing is downloaded here). */
static void setup_gvisor_hint(FILE *out)
{
        struct gvisor_runsc_facts f;
        struct sbx_error err = {0};

        if (gvisor_runsc_facts(&f, &err) == -ENOENT)
                fprintf(out, "setup: the gvisor backend (gVisor's kernel between the code and "
                             "yours, rootless) needs runsc, which is not installed: sudo apt "
                             "install runsc (Debian 12 and later), then restart the "
                             "server\n");
}

/* Run images/build.sh -o @outdir all; its output goes to stderr. */
static int run_build_script(const char *script, const char *outdir, const char *python_target,
                            const volatile sig_atomic_t *cancel, struct sbx_error *err)
{
        pid_t pid, w;
        int status = 0;

        pid = fork();
        if (pid < 0)
                return sbx_fail(err, errno, "cannot fork: %s", strerror(errno));
        if (pid == 0) {
                if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
                        _exit(127);
                execl("/bin/bash", "bash", script, "-o", outdir, python_target, "node",
                      (char *)NULL);
                _exit(127);
        }
        do {
                w = waitpid(pid, &status, 0);
                if (w < 0 && errno == EINTR && cancel && *cancel)
                        kill(pid, SIGTERM);
        } while (w < 0 && errno == EINTR);
        if (w < 0)
                return sbx_fail(err, errno, "cannot wait for '%s': %s", script, strerror(errno));
        if (cancel && *cancel)
                return sbx_fail(err, EINTR, "building the images was cancelled");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return sbx_fail(err, EIO,
                                "'%s' failed (%s %d): see its output above; it needs mmdebstrap "
                                "and the Debian mirror apt uses",
                                script, WIFEXITED(status) ? "exit status" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
}

/* Is @dir/<target>.tar there and the bytes installed as @language (its recorded identity)? */
static bool saved_tar_current(const struct setup_run_args *a, const char *language,
                              const char *target)
{
        _cleanup_free_ char *tar = xasprintf("%s/%s.tar", a->save_tars, target);
        _cleanup_free_ char *id = NULL, *want = NULL;
        char hex[65];

        if (setup_installed_identity(a->rootfs_dir, language, &id, NULL, NULL) < 0 ||
            sbx_sha256_file(tar, a->cancel, hex, NULL) < 0)
                return false;
        want = xasprintf("sha256:%s", hex);
        return strcmp(id, want) == 0;
}

/* Copy @from to @to (a new file, 0644), stopping when cancelled. */
static int copy_file(const char *from, const char *to, const volatile sig_atomic_t *cancel,
                     struct sbx_error *err)
{
        _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = -1;
        char buf[1 << 16];
        ssize_t n;

        if (in < 0)
                return sbx_fail(err, errno, "cannot open '%s': %s", from, strerror(errno));
        out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (out < 0)
                return sbx_fail(err, errno, "cannot create '%s': %s", to, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) != 0) {
                if (cancel && *cancel)
                        return sbx_fail(err, EINTR, "saving '%s' was cancelled", to);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || write(out, buf, (size_t)n) != n)
                        return sbx_fail(err, errno ? errno : EIO, "cannot copy '%s' to '%s': %s",
                                        from, to, strerror(errno ? errno : EIO));
        }
        if (fsync(out) < 0)
                return sbx_fail(err, errno, "cannot write '%s': %s", to, strerror(errno));
        return 0;
}

/* Keep the built @tar as @a->save_tars/<language>.tar, replaced whole (never a half file under
 * that name): a rename when on the same filesystem, else a copy next to it and a rename. */
static int save_tar(const struct setup_run_args *a, const char *language, const char *tar,
                    struct sbx_error *err)
{
        _cleanup_free_ char *dst = xasprintf("%s/%s.tar", a->save_tars, language);
        _cleanup_free_ char *tmp =
            xasprintf("%s/.%s.tar.partial-%d", a->save_tars, language, (int)getpid());
        int r;

        if (mkdir(a->save_tars, 0755) < 0 && errno != EEXIST)
                return sbx_fail(err, errno, "cannot create '%s': %s", a->save_tars,
                                strerror(errno));
        if (rename(tar, dst) == 0)
                goto done;
        if (errno != EXDEV)
                return sbx_fail(err, errno, "cannot move '%s' to '%s': %s", tar, dst,
                                strerror(errno));
        unlink(tmp);
        r = copy_file(tar, tmp, a->cancel, err);
        if (r == 0 && rename(tmp, dst) < 0)
                r = sbx_fail(err, errno, "cannot rename '%s' to '%s': %s", tmp, dst,
                             strerror(errno));
        if (r < 0) {
                unlink(tmp);
                return r;
        }
done:
        fprintf(a->out, "setup: %s rootfs tarball saved as '%s'\n", language, dst);
        return 0;
}

static int from_debian(const struct setup_run_args *a, struct sbx_error *err)
{
        _cleanup_free_ char *dir = NULL, *script = NULL, *recipe = NULL, *builddir = NULL;
        struct setup_pins pins = {0};
        static const char *const langs[] = {"python", "node"};
        /* build.sh's target for each language: python-data is installed as python */
        const char *const targets[] = {a->python_data ? "python-data" : "python", "node"};
        char hex[65];
        bool all_current = true;
        size_t i;
        int r;

        r = setup_images_dir(&dir, err);
        if (r < 0)
                return r;
        script = xasprintf("%s/build.sh", dir);
        r = sbx_sha256_file(script, NULL, hex, err);
        if (r < 0)
                return r;
        recipe = xasprintf("sha256:%s", hex);
        /* The data variant records its name after the recipe, so that asking for the other
         * variant finds nothing current. */
        _cleanup_free_ char *recipe_py =
            xasprintf("%s%s", recipe, a->python_data ? " python-data" : "");
        if (setup_pins_load(&pins, NULL) == 0 && strcmp(pins.debian_recipe, recipe) != 0)
                log_warning("'%s' is %s but images/pins names %s: the recipe changed since it "
                            "was pinned, using it anyway",
                            script, recipe, pins.debian_recipe);
        setup_pins_done(&pins);

        for (i = 0; i < ELEMENTSOF(langs); i++) {
                _cleanup_free_ char *id = NULL, *have = NULL;

                if (setup_installed_identity(a->rootfs_dir, langs[i], &id, &have, NULL) < 0 ||
                    !have || strcmp(have, i == 0 ? recipe_py : recipe) != 0)
                        all_current = false;
                /* An engine that answers but lacks the image needs the build too. */
                if (setup_engine_present(a, langs[i]) == 0)
                        all_current = false;
                /* Tarballs asked for but not there (or not these bytes) need the build too. */
                if (all_current && a->save_tars && !saved_tar_current(a, langs[i], targets[i]))
                        all_current = false;
        }
        if (all_current && !a->force) {
                fprintf(a->out,
                        "setup: %s and node are installed from recipe %s in '%s'%s, "
                        "nothing to do\n",
                        a->python_data ? "python (with numpy, pandas, matplotlib, scipy)"
                                       : "python",
                        recipe, a->rootfs_dir, a->save_tars ? " and their tarballs are saved" : "");
                return 0;
        }

        builddir = xstrdup("/var/tmp/vestibule-build-XXXXXX");
        if (!mkdtemp(builddir))
                return sbx_fail(err, errno, "cannot create a build folder in /var/tmp: %s",
                                strerror(errno));
        fprintf(a->progress ? a->progress : stderr,
                "setup: building python and node from Debian packages with '%s' (a few "
                "minutes)\n",
                script);
        r = run_build_script(script, builddir, targets[0], a->cancel, err);
        for (i = 0; r == 0 && i < ELEMENTSOF(langs); i++) {
                _cleanup_free_ char *tar = xasprintf("%s/%s.tar", builddir, targets[i]);
                _cleanup_free_ char *desc = xasprintf("debian: images/build.sh %s", recipe);
                const char *layers[] = {tar};
                struct setup_source src = {
                    .language = langs[i],
                    .description = desc,
                    .layers = layers,
                    .n_layers = 1,
                    .recipe = i == 0 ? recipe_py : recipe,
                };

                r = setup_run_install(a, &src, err);
                if (r == 0)
                        r = setup_engine_import(a, langs[i], tar, err);
                if (r == 0 && a->save_tars)
                        r = save_tar(a, targets[i], tar, err);
        }
        {
                _cleanup_free_ char *base = xstrdup(strrchr(builddir, '/') + 1);
                _cleanup_close_ int tmpfd = open("/var/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (tmpfd < 0 || setup_remove_tree(tmpfd, base) < 0)
                        log_warning("cannot remove the build folder '%s', ignoring", builddir);
        }
        return r;
}

/* In the server's OCI image (config_in_container()) the ladder never picks native: a native
 * rootfs there is time and space for nothing (about 20 s per language), so none is unpacked
 * and none is downloaded; the engine's image is imported or pulled as everywhere. */
static bool native_never_runs(const struct setup_run_args *a)
{
        return a->cfg && a->cfg->in_container;
}

int setup_run_install(const struct setup_run_args *a, const struct setup_source *src,
                      struct sbx_error *err)
{
        struct setup_opts o = {
            .progress = a->progress,
            .progress_tty = a->progress_tty,
            .cancel = a->cancel,
            .force = a->force,
        };
        bool skipped = false;
        int r;

        if (native_never_runs(a)) {
                fprintf(a->out,
                        "setup: %s rootfs not unpacked: this server runs in its OCI image (%s), "
                        "where the native backend never runs; the container engine's image is "
                        "what it uses\n",
                        src->language, a->cfg->in_container_marker);
                return 0;
        }
        r = setup_install(a->rootfs_dir, src, &o, &skipped, NULL, err);
        if (r < 0)
                return r;
        fprintf(a->out, "setup: %s rootfs %s in '%s/%s'\n", src->language,
                skipped ? "already installed" : "installed", a->rootfs_dir, src->language);
        return 0;
}

static int remove_var_tmp_dir(const char *dir)
{
        _cleanup_close_ int tmpfd = open("/var/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (tmpfd < 0)
                return -errno;
        return setup_remove_tree(tmpfd, strrchr(dir, '/') + 1);
}

/* One language from the registry: nothing is fetched when the pinned digest is installed. */
static int from_registry_one(const struct setup_run_args *a, const char *language,
                             const char *image, struct sbx_error *err)
{
        struct setup_opts o = {
            .progress = a->progress,
            .progress_tty = a->progress_tty,
            .cancel = a->cancel,
            .force = a->force,
        };
        _cleanup_free_ char *have = NULL, *workdir = NULL, *desc = NULL;
        struct registry_ref ref = {0};
        struct registry_image img = {0};
        int r;

        r = registry_ref_parse(image, &ref, err);
        if (r < 0)
                return r;
        if (native_never_runs(a)) {
                fprintf(a->out,
                        "setup: %s rootfs not downloaded: this server runs in its OCI image (%s), "
                        "where the native backend never runs\n",
                        language, a->cfg->in_container_marker);
                registry_ref_done(&ref);
                return 0;
        }
        if (!a->force &&
            setup_installed_identity(a->rootfs_dir, language, &have, NULL, NULL) == 0 &&
            strcmp(have, ref.digest) == 0) {
                fprintf(a->out, "setup: %s rootfs already installed from %s in '%s/%s'\n", language,
                        image, a->rootfs_dir, language);
                registry_ref_done(&ref);
                return 0;
        }
        workdir = xstrdup("/var/tmp/vestibule-pull-XXXXXX");
        if (!mkdtemp(workdir)) {
                registry_ref_done(&ref);
                return sbx_fail(err, errno, "cannot create a download folder in /var/tmp: %s",
                                strerror(errno));
        }
        r = registry_pull(&ref, workdir, language, &o, &img, err);
        if (r == 0) {
                desc = xasprintf("registry: %s", image);
                struct setup_source src = {
                    .language = language,
                    .description = desc,
                    .layers = (const char *const *)img.layer_paths,
                    .layer_sha256 = (const char *const *)img.layer_sha256,
                    .n_layers = img.n_layers,
                    .identity = ref.digest,
                };

                r = setup_run_install(a, &src, err);
        }
        registry_image_done(&img);
        registry_ref_done(&ref);
        if (remove_var_tmp_dir(workdir) < 0)
                log_warning("cannot remove the download folder '%s', ignoring", workdir);
        return r;
}

static int from_registry(const struct setup_run_args *a, struct sbx_error *err)
{
        struct setup_pins pins = {0};
        int r;

        if (!a->image_python || !a->image_node) {
                r = setup_pins_load(&pins, err);
                if (r < 0)
                        return r;
        }
        const char *py = a->image_python ? a->image_python : pins.python_registry;
        const char *node = a->image_node ? a->image_node : pins.node_registry;

        r = from_registry_one(a, "python", py, err);
        if (r == 0)
                r = setup_engine_pull(a, "python", py, err);
        if (r == 0)
                r = from_registry_one(a, "node", node, err);
        if (r == 0)
                r = setup_engine_pull(a, "node", node, err);
        setup_pins_done(&pins);
        return r;
}

int setup_run(const struct setup_run_args *args, struct sbx_error *err)
{
        struct setup_run_state state = {0};
        struct setup_run_args copy = *args;
        const struct setup_run_args *a = &copy;
        int r, ready;

        copy.state = &state;

        if (a->from_debian) {
                r = from_debian(a, err);
        } else if (a->from_tar) {
                _cleanup_free_ char *desc = xasprintf("tar: %s", a->from_tar);
                const char *layers[] = {a->from_tar};
                struct setup_source src = {
                    .language = a->language,
                    .description = desc,
                    .layers = layers,
                    .n_layers = 1,
                };

                r = setup_run_install(a, &src, err);
                if (r == 0)
                        r = setup_engine_import(a, a->language, a->from_tar, err);
        } else {
                r = from_registry(a, err);
        }
        if (r < 0)
                return r;
        ready = 0;
        if (a->readiness)
                ready = a->readiness(a->out) == 0 ? 0 : 1;
        else
                /* no check was set (a caller other than the CLI): say it did not run */
                fprintf(a->out, "setup: readiness check not run: "
                                "run `vestibule-mcp doctor` to see the isolation this environment "
                                "gets\n");
        setup_apparmor_hint(a->out);
        setup_gvisor_hint(a->out);
        setup_print_mcp_config(a);
        return ready;
}
