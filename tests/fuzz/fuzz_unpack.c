/* fuzz_unpack.c - libFuzzer target: setup's tarball unpack (src/setup/unpack.c), the code that
 * turns an image layer from the network into files on the host. The input is the tarball's
 * bytes (plain or compressed: libarchive picks the filter), unpacked by setup_unpack_layer()
 * into a fresh directory under a private scratch folder, on top of a tree that already holds
 * a folder, a symlink pointing outside and a file (so whiteouts and replacements have
 * something to act on). After each run the scratch folder must hold exactly what it held
 * before outside the tree, and the bait file outside must be unchanged: anything written or
 * changed outside is an escape, reported as a crash. Crashes, leaks and UB are findings; a
 * refused tarball is a normal outcome.
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh unpack SECONDS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "setup/setup.h"

static char *scratch;
static char *tar_path, *tree, *bait;
static struct stat bait_st;

static void die(const char *what)
{
        fprintf(stderr, "fuzz_unpack: %s: %s\n", what, strerror(errno));
        abort();
}

/* the scratch folder goes when the fuzzer exits (libFuzzer ends with exit()) */
static void remove_scratch(void)
{
        int fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const char *slash = strrchr(scratch, '/');
        int parent;

        if (fd < 0 || !slash)
                return;
        close(fd);
        _cleanup_free_ char *dir = strndup(scratch, (size_t)(slash - scratch));
        parent = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent >= 0) {
                (void)setup_remove_tree(parent, slash + 1);
                close(parent);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        FILE *f;

        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        /* $TMPDIR (scripts/fuzz.sh points it at /dev/shm: a tmpfs keeps disk I/O out) */
        scratch = xasprintf("%s/vestibule-fuzz-unpack-XXXXXX",
                            getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(scratch))
                die("mkdtemp");
        atexit(remove_scratch);
        tar_path = xasprintf("%s/in.tar", scratch);
        tree = xasprintf("%s/tree", scratch);
        bait = xasprintf("%s/bait", scratch);
        f = fopen(bait, "we");
        if (!f)
                die("bait");
        fputs("outside the tree\n", f);
        fclose(f);
        if (chmod(bait, 0600) < 0 || stat(bait, &bait_st) < 0)
                die("bait");
        return 0;
}

/* Only in.tar, tree and bait in the scratch folder; bait unchanged. */
static void check_outside(void)
{
        struct stat st;
        DIR *d = opendir(scratch);
        struct dirent *de;

        if (!d)
                die("opendir scratch");
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "in.tar") && strcmp(de->d_name, "tree") &&
                    strcmp(de->d_name, "bait")) {
                        fprintf(stderr, "fuzz_unpack: '%s' appeared outside the tree\n",
                                de->d_name);
                        abort();
                }
        closedir(d);
        if (lstat(bait, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != bait_st.st_size ||
            st.st_mode != bait_st.st_mode || st.st_mtim.tv_sec != bait_st.st_mtim.tv_sec ||
            st.st_mtim.tv_nsec != bait_st.st_mtim.tv_nsec) {
                fprintf(stderr, "fuzz_unpack: the bait outside the tree changed\n");
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct setup_unpack_stats st = {0};
        struct sbx_error err = {0};
        int fd, tfd;

        fd = open(tar_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                die("in.tar");
        if (size && write(fd, data, size) != (ssize_t)size)
                die("write in.tar");
        close(fd);
        tfd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tfd < 0)
                die("scratch");
        (void)setup_remove_tree(tfd, "tree");
        if (mkdir(tree, 0755) < 0 || mkdirat(tfd, "tree/dir", 0755) < 0 ||
            symlinkat(bait, tfd, "tree/out") < 0 || symlinkat("..", tfd, "tree/dir/up") < 0)
                die("tree");
        fd = openat(tfd, "tree/dir/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                die("tree/dir/file");
        close(fd);
        (void)setup_unpack_layer(tree, tar_path, "fuzz", NULL, NULL, &st, NULL, &err);
        check_outside();
        if (setup_remove_tree(tfd, "tree") < 0)
                die("remove tree");
        close(tfd);
        return 0;
}
