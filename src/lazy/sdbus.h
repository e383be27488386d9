/* lazy/sdbus.h - sd-bus from libsystemd (libsystemd.so.0, Debian package libsystemd0), loaded
 * on first use.
 *
 * Include this instead of <systemd/sd-bus.h>. Only a transient scope per run (native backend
 * with a systemd user manager) and doctor talk to the user bus; a server that never tries the
 * bus never maps libsystemd nor its libgcrypt, lz4, zstd, xz and libcap. Call
 * lazy_sdbus_load() before the first sd_bus_* call for a message naming the package
 * ("libsystemd0 is not installed ...: apt-get install libsystemd0").
 *
 * Unlike the other tables, nothing here aborts when the library is missing:
 * lazy_sd_bus_open_address() fails with -ELIBACC, and the cleanup helpers
 * (sd_bus_flush_close_unrefp, sd_bus_message_unrefp, sd_bus_error_free on an empty error) do
 * nothing, as they would on the NULL objects such a failure leaves; every other sd_bus_* call needs
 * a bus first. The header's own cleanup helpers are replaced by these, since its static inline ones
 * would call libsystemd directly. See lazy/lazy.h. */
#pragma once

#include <systemd/sd-bus.h>

#include "common/error.h"

/* Every libsystemd function the code calls; add a name here when a new one is needed. */
#define LAZY_SDBUS_SYMBOLS(X)                                                                      \
        X(sd_bus_call)                                                                             \
        X(sd_bus_call_method)                                                                      \
        X(sd_bus_error_free)                                                                       \
        X(sd_bus_flush_close_unref)                                                                \
        X(sd_bus_get_fd)                                                                           \
        X(sd_bus_is_open)                                                                          \
        X(sd_bus_message_append)                                                                   \
        X(sd_bus_message_close_container)                                                          \
        X(sd_bus_message_new_method_call)                                                          \
        X(sd_bus_message_open_container)                                                           \
        X(sd_bus_message_unref)                                                                    \
        X(sd_bus_new)                                                                              \
        X(sd_bus_process)                                                                          \
        X(sd_bus_set_address)                                                                      \
        X(sd_bus_set_bus_client)                                                                   \
        X(sd_bus_start)

struct lazy_sdbus_table {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator cannot be parenthesised */
#define LAZY_FIELD_(name) __typeof__(&name) name;
        LAZY_SDBUS_SYMBOLS(LAZY_FIELD_)
#undef LAZY_FIELD_
};

/**
 * lazy_sdbus_load() - load libsystemd.so.0 and resolve every name above, once per process.
 * Thread-safe; cheap after the first call.
 * Return: 0, or -ENOENT (libsystemd0 not installed) / -ENOSYS (a build without one of the
 * functions), with @err naming the package to install.
 */
int lazy_sdbus_load(struct sbx_error *err);

/** lazy_sdbus() - the resolved table; loads first, aborts if that fails (see lazy.h). */
const struct lazy_sdbus_table *lazy_sdbus(void);

/** lazy_sdbus_loaded() - whether libsystemd is loaded (for the helpers below; never loads). */
int lazy_sdbus_loaded(void);

#ifndef LAZY_SDBUS_IMPL
#include <errno.h>

/* What sd_bus_open_user(3) does once it knows the address, without reading the environment
 * itself (only src/config does; common/rundir.h finds the address): a client connection that
 * says Hello (sd_bus_set_bus_client), started synchronously. sd_bus_new(3),
 * sd_bus_set_address(3), sd_bus_start(3). Returns 0 with *@ret set, or a negative errno. */
static inline int lazy_sd_bus_open_address(const char *address, sd_bus **ret)
{
        const struct lazy_sdbus_table *t;
        sd_bus *bus = NULL;
        int r;

        if (lazy_sdbus_load(NULL) < 0)
                return -ELIBACC; /* "cannot access a needed shared library" */
        t = lazy_sdbus();
        r = t->sd_bus_new(&bus);
        if (r < 0)
                return r;
        r = t->sd_bus_set_address(bus, address);
        if (r >= 0)
                r = t->sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = t->sd_bus_start(bus);
        if (r < 0) {
                t->sd_bus_flush_close_unref(bus);
                return r;
        }
        *ret = bus;
        return 0;
}

static inline void lazy_sd_bus_error_free(sd_bus_error *e)
{
        if (!e->name && !e->message && !lazy_sdbus_loaded())
                return; /* SD_BUS_ERROR_NULL: nothing to free, and no library to ask */
        lazy_sdbus()->sd_bus_error_free(e);
}

static inline void lazy_sd_bus_flush_close_unrefp(sd_bus **p)
{
        if (*p)
                lazy_sdbus()->sd_bus_flush_close_unref(*p);
}

static inline void lazy_sd_bus_message_unrefp(sd_bus_message **p)
{
        if (*p)
                lazy_sdbus()->sd_bus_message_unref(*p);
}

#define sd_bus_error_free lazy_sd_bus_error_free
#define sd_bus_flush_close_unrefp lazy_sd_bus_flush_close_unrefp
#define sd_bus_message_unrefp lazy_sd_bus_message_unrefp
#define sd_bus_call (lazy_sdbus()->sd_bus_call)
#define sd_bus_call_method (lazy_sdbus()->sd_bus_call_method)
#define sd_bus_flush_close_unref (lazy_sdbus()->sd_bus_flush_close_unref)
#define sd_bus_message_append (lazy_sdbus()->sd_bus_message_append)
#define sd_bus_message_close_container (lazy_sdbus()->sd_bus_message_close_container)
#define sd_bus_message_new_method_call (lazy_sdbus()->sd_bus_message_new_method_call)
#define sd_bus_message_open_container (lazy_sdbus()->sd_bus_message_open_container)
#define sd_bus_message_unref (lazy_sdbus()->sd_bus_message_unref)
#define sd_bus_is_open (lazy_sdbus()->sd_bus_is_open)
#define sd_bus_process (lazy_sdbus()->sd_bus_process)
#define sd_bus_get_fd (lazy_sdbus()->sd_bus_get_fd)
#define sd_bus_new (lazy_sdbus()->sd_bus_new)
#define sd_bus_set_address (lazy_sdbus()->sd_bus_set_address)
#define sd_bus_set_bus_client (lazy_sdbus()->sd_bus_set_bus_client)
#define sd_bus_start (lazy_sdbus()->sd_bus_start)
#endif
