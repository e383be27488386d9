/* lazy.h - load a shared library on first use (dlopen by SONAME) instead of at exec.
 *
 * Why: the server's idle footprint. libcurl (and the TLS, Kerberos, LDAP, ssh, idn, psl ...
 * libraries it pulls in), libarchive (libxml2, ICU, libstdc++ ...), libsystemd (libgcrypt,
 * lz4, zstd, xz, libcap) and libcrypto made up ~9 MiB of a native server's 11 MiB idle RSS
 * although a native server that never touches the engine, never runs setup and has no config
 * file uses none of them. Each library now has one header under src/lazy/ (curl.h, archive.h,
 * yaml.h, sdbus.h, crypto.h) that includes the real header for the types and maps every
 * function name the code uses onto a pointer in a table, resolved with dlsym on first use.
 *
 * How a module uses one: include "lazy/curl.h" instead of <curl/curl.h>, and call
 * lazy_curl_load(err) at the module's entry points (engine_connect, the backend constructor,
 * setup's steps ...) before the first call: a missing library is then an ordinary error
 * naming the Debian package to install ("libcurl4 is not installed: apt-get install libcurl4"),
 * returned through the usual sbx_error path. A call through the table without a successful
 * load first loads it too, and when that fails the server stops with that same message on
 * stderr (abort): that is a missing lazy_*_load() at an entry point, a bug, never a state a
 * user can reach through a missing package alone. (sd-bus never aborts: sdbus.h says why.)
 *
 * Loading is once per process (pthread_once), thread-safe, and never undone (no dlclose): the
 * table is then read-only. The table's fields are typed from the real prototypes
 * (typeof(&name)), so a call with the wrong arguments is a compile error, as with direct
 * linking. The SONAME pins the ABI (libcurl.so.4, libarchive.so.13, libyaml-0.so.2,
 * libsystemd.so.0, libcrypto.so.3): a library with another major version is not taken.
 * The search is the dynamic linker's, as for the libraries linked at exec (no new path).
 */
#pragma once

#include <pthread.h>

#include "common/error.h"

/* One library's loader state. Filled by LAZY_STATE_INIT, private to its src/lazy/X.c. */
struct lazy_state {
        const char *soname;  /* "libcurl.so.4" */
        const char *package; /* the Debian package that ships it: "libcurl4" */
        const char *users;   /* who needs it, for the message: "the container backend" */
        pthread_once_t once;
        int code;      /* after the once: 0 loaded, else a positive errno */
        char msg[480]; /* after the once: why it did not load */
};

#define LAZY_STATE_INIT(soname_, package_, users_)                                                 \
        {                                                                                          \
                .soname = (soname_), .package = (package_), .users = (users_),                     \
                .once = PTHREAD_ONCE_INIT,                                                         \
        }

/**
 * lazy_open() - dlopen(@st->soname, RTLD_NOW | RTLD_LOCAL). Called inside @st's once.
 * Return: the handle, or NULL with @st->code = ENOENT and @st->msg naming the package.
 */
void *lazy_open(struct lazy_state *st);

/**
 * lazy_sym() - dlsym(@handle, @name). Called inside @st's once, after lazy_open().
 * Return: the address, or NULL with @st->code = ENOSYS and @st->msg naming the symbol and
 * the package (a library too old for us); later calls keep the first failure.
 */
void *lazy_sym(struct lazy_state *st, void *handle, const char *name);

/**
 * lazy_result() - after the once: 0 when the library and every symbol resolved, else
 * -code with @err filled from @st (the package to install). @err may be NULL.
 */
int lazy_result(const struct lazy_state *st, struct sbx_error *err);

/**
 * lazy_require() - after the once: return when loaded, else log @st's message as an error
 * and abort(): a call through the table that no lazy_*_load() guarded (a bug, see above).
 */
void lazy_require(const struct lazy_state *st);

/**
 * lazy_is_loaded() - whether the dynamic linker already has @soname mapped in this process
 * (dlopen RTLD_NOLOAD; maps nothing). For tests and doctor.
 */
int lazy_is_loaded(const char *soname);
