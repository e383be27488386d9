/* hijack.h - Engine API connections switched to a raw byte stream (the API's "Hijacking":
 * "Connection: Upgrade", "Upgrade: tcp"), and the execs whose stdin and stdout travel over one.
 * Used by the volume path's session (cells_attach.c: the container's attach, the lifeline exec)
 * and by the egress bridge (egress_stream.c). libcurl connects (unix socket, or tcp with TLS)
 * and then only carries bytes (CURLOPT_CONNECT_ONLY, curl_easy_send/recv). Private to
 * src/engine. Source: Docker Engine API v1.41, "Hijacking" under ContainerAttach and ExecStart,
 * https://docs.docker.com/engine/api/v1.41/#tag/Exec/operation/ExecStart */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "lazy/curl.h"

#include "common/error.h"
#include "engine/engine.h"

/* The bytes of the stream that came with the answer's head: at most this many. */
#define ENGINE_HIJACK_REST 4096

/**
 * engine_hijack() - POST @path (a request target starting with '/', already versioned and
 * escaped) with the JSON @body (NULL: none) on a connection of its own, and switch it to a raw
 * stream. The answer's head is read to its blank line (at most 4 KiB, within @head_ms ms) and
 * must be 101 (or 200 from an engine that answers so).
 * @what: what the call does, for the errors ("attach to the session's container").
 * @ret_h: the curl handle, set also on error (the caller frees it with curl_easy_cleanup(), which
 *         closes the connection); *@ret_sock: its socket (owned by the handle; -1 until known).
 * @rest, *@rest_n: the stream's first bytes, those after the head (up to ENGINE_HIJACK_REST).
 * Return: 0, or -errno with @err naming @what: ECONNREFUSED (no connection), EIO (the request
 * could not be sent), ETIMEDOUT (no head within @head_ms), EPROTO (closed, refused, or a head
 * over 4 KiB).
 */
int engine_hijack(const struct engine_conn *c, const char *path, const char *body, const char *what,
                  int head_ms, CURL **ret_h, int *ret_sock, char rest[ENGINE_HIJACK_REST],
                  size_t *rest_n, struct sbx_error *err);

/**
 * engine_hijack_send() - send all @n bytes of @buf on the hijacked connection @h (socket @sock),
 * waiting for room up to @timeout_ms ms each time the socket is full (curl_easy_send,
 * https://curl.se/libcurl/c/curl_easy_send.html).
 * Return: 0, or -EIO (no room in time, or the connection failed).
 */
int engine_hijack_send(CURL *h, int sock, const void *buf, size_t n, int timeout_ms);

/* An exec to create in a running container: its stdin and stdout attached, stderr not, no TTY
 * (so the Engine API's stream format tells stdout apart: 8-byte frame headers). */
struct engine_exec {
        uid_t uid;               /* "User": "<uid>:<uid>" */
        const char *const *argv; /* "Cmd", NULL-terminated, at least one */
        const char *const *env;  /* "Env" ("NAME=value"), NULL-terminated; NULL: the image's */
        const char *what;        /* what it is, for the errors ("the egress bridge's exec") */
};

/**
 * engine_exec_create() - POST /containers/{@id}/exec for @x (Engine API ContainerExec,
 * https://docs.docker.com/engine/api/v1.41/#tag/Exec/operation/ContainerExec; 30 s bound).
 * Return: 0 with the exec's id in @ret (NUL-terminated, hex, at most 64 characters: checked), or
 * -errno with @err (the engine's refusal, or EPROTO for an id that is not one).
 */
int engine_exec_create(const struct engine_conn *c, const char *id, const struct engine_exec *x,
                       char ret[72], struct sbx_error *err);

/**
 * engine_exec_hijack() - start exec @eid (POST /exec/{@eid}/start, not detached, no TTY) on a
 * hijacked connection: engine_hijack() with @what, @head_ms and its @ret_h, @ret_sock, @rest and
 * @rest_n. The exec's stdin is the connection (its end is the exec's stdin's EOF), its stdout
 * comes back in the stream format. Return: as engine_hijack().
 */
int engine_exec_hijack(const struct engine_conn *c, const char *eid, const char *what, int head_ms,
                       CURL **ret_h, int *ret_sock, char rest[ENGINE_HIJACK_REST], size_t *rest_n,
                       struct sbx_error *err);
