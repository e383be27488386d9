/* setup.c - the `vestibule-mcp setup` command line: arguments, settings, signals; the work is in
 * run.c, install.c and unpack.c. */
#include "setup/setup.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "setup/pins.h"
#include "setup/setup_run.h"

static volatile sig_atomic_t cancel_requested;

static void on_cancel_signal(int sig)
{
        (void)sig;
        cancel_requested = 1;
}

static const char usage_text[] =
    "Usage: vestibule-mcp setup [OPTIONS]\n"
    "\n"
    "Install the sandbox root filesystems the native backend runs code in, into\n"
    "VESTIBULE_ROOTFS_DIR (default ~/.vestibule/rootfs): python/ (also used for bash)\n"
    "and node/. Each is unpacked into a temporary folder, checked, and swapped in whole,\n"
    "so an interrupted setup (Ctrl-C) never leaves a half-installed tree. A second run\n"
    "that finds the same bytes installed does nothing.\n"
    "\n"
    "Options:\n"
    "  --from-debian          build both from Debian packages with images/build.sh\n"
    "                         (mmdebstrap; needs the Debian mirror apt uses) and install\n"
    "                         them; also VESTIBULE_IMAGE_SOURCE=debian\n"
    "  --python-data          with --from-debian: python with numpy, pandas, matplotlib\n"
    "                         and scipy (Debian's; ~4x the size), installed as python;\n"
    "                         matplotlib draws off-screen and plt.show() saves PNGs\n"
    "                         into /workspace, which come back as images\n"
    "  --from-tar FILE        install a rootfs tarball you built or copied in\n"
    "  --language python|node which rootfs --from-tar installs\n"
    "  --rootfs-dir DIR       install here instead of VESTIBULE_ROOTFS_DIR\n"
    "  --save-tars DIR        with --from-debian: also keep the built python.tar and\n"
    "                         node.tar in DIR (to install elsewhere with --from-tar)\n"
    "  --force                install even when the same bytes are already installed\n"
    "  --apparmor             as root, only this: write the AppArmor profile that grants\n"
    "                         this binary user namespaces (Ubuntu 23.10+ restricts them)\n"
    "                         to /etc/apparmor.d and load it; nothing else changes\n"
    "  -h, --help             this text\n"
    "\n"
    "Without --from-debian or --from-tar, setup pulls the pinned images (images/pins, or\n"
    "VESTIBULE_IMAGE_PYTHON / VESTIBULE_IMAGE_NODE as name@sha256:...) from their registry\n"
    "over HTTPS, checking every byte against the digests; no Docker is needed. When the\n"
    "pinned digest is already installed, no request is made. Set VESTIBULE_ROOTFS_DIR\n"
    "(and VESTIBULE_IMAGE_*) for setup exactly as in your MCP config, or the server will\n"
    "not find what setup installed.\n"
    "\n"
    "With --from-debian or --from-tar, when a container engine answers (DOCKER_HOST, the\n"
    "docker context or the known sockets; VESTIBULE_RUNTIME), the same tarball is also\n"
    "imported into it as the image the container backend runs with\n"
    "VESTIBULE_IMAGE_SOURCE=debian (vestibule/python:bookworm, vestibule/node:bookworm, or\n"
    "your VESTIBULE_IMAGE_PYTHON / _NODE name). At the end setup prints the MCP config to add.\n";

int setup_main(int argc, char **argv, setup_readiness_fn readiness)
{
        static const struct option longopts[] = {
            {"from-debian", no_argument, NULL, 'd'},
            {"python-data", no_argument, NULL, 'D'},
            {"from-tar", required_argument, NULL, 't'},
            {"language", required_argument, NULL, 'l'},
            {"rootfs-dir", required_argument, NULL, 'r'},
            {"force", no_argument, NULL, 'f'},
            {"save-tars", required_argument, NULL, 's'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        struct setup_run_args a = {.readiness = readiness,
                                   .out = stdout,
                                   .progress = stderr,
                                   .progress_tty = isatty(STDERR_FILENO) == 1,
                                   .cancel = &cancel_requested};
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};
        struct sigaction sa = {.sa_handler = on_cancel_signal}; /* no SA_RESTART: reads stop */
        const char *rootfs_override = NULL;
        _cleanup_free_ char *image_python = NULL, *image_node = NULL;
        int c, r;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd':
                        a.from_debian = true;
                        break;
                case 'D':
                        a.python_data = true;
                        break;
                case 't':
                        a.from_tar = optarg;
                        break;
                case 'l':
                        a.language = optarg;
                        break;
                case 'r':
                        rootfs_override = optarg;
                        break;
                case 'f':
                        a.force = true;
                        break;
                case 's':
                        a.save_tars = optarg;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        fputs(usage_text, stderr);
                        return 2;
                }
        }
        if (optind < argc || (a.from_debian && a.from_tar) || (a.from_tar && !a.language) ||
            (a.language && !a.from_tar)) {
                fprintf(stderr, "setup: use --from-debian, or --from-tar FILE with --language "
                                "python|node\n\n");
                fputs(usage_text, stderr);
                return 2;
        }
        if (a.python_data && !a.from_debian) {
                fprintf(stderr, "setup: --python-data goes with --from-debian (or install a "
                                "python-data.tar with --from-tar FILE --language python)\n");
                return 2;
        }
        if (a.save_tars && a.save_tars[0] != '/') {
                fprintf(stderr, "setup: --save-tars '%s' must be an absolute path\n", a.save_tars);
                return 2;
        }
        if (a.language && strcmp(a.language, "python") != 0 && strcmp(a.language, "node") != 0) {
                fprintf(stderr, "setup: unknown language '%s': use python or node\n", a.language);
                return 2;
        }
        r = config_load(&cfg, &err);
        if (r < 0) {
                fprintf(stderr, "setup: %s\n", err.msg);
                return 1;
        }
        if (cfg->invalid) {
                fprintf(stderr, "setup: %s\n", cfg->invalid_msg);
                config_free(cfg);
                return 1;
        }
        if (!a.from_tar && cfg->image_source == SBX_IMAGE_SOURCE_DEBIAN)
                a.from_debian = true;
        if (a.save_tars && !a.from_debian) {
                fprintf(stderr, "setup: --save-tars goes with --from-debian (it keeps what the "
                                "build made)\n");
                config_free(cfg);
                return 2;
        }
        a.rootfs_dir = xstrdup(rootfs_override ? rootfs_override : cfg->rootfs_dir);
        image_python = cfg->image_python ? xstrdup(cfg->image_python) : NULL;
        image_node = cfg->image_node ? xstrdup(cfg->image_node) : NULL;
        a.image_python = image_python;
        a.image_node = image_node;
        a.cfg = cfg;
        if (a.rootfs_dir[0] != '/') {
                fprintf(stderr, "setup: --rootfs-dir '%s' must be an absolute path\n",
                        a.rootfs_dir);
                free((char *)a.rootfs_dir);
                config_free(cfg);
                return 2;
        }

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        r = setup_run(&a, &err);
        free((char *)a.rootfs_dir);
        config_free(cfg);
        if (r < 0) {
                /* a refusal quotes tar entry names and registry replies: escaped for the
                 * terminal, as `vestibule-mcp audit` prints (issue 12, finding 26) */
                _cleanup_free_ char *shown = sbx_term_escape(err.msg, strlen(err.msg), false);
                fprintf(stderr, "setup: %s\n", shown);
                return r == -EINTR || cancel_requested ? 130 : 1;
        }
        return r;
}
