/* hijack.c - hijacked Engine API connections and the execs started on them (hijack.h). */
#include "engine/hijack.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "engine/state.h"

int engine_hijack_send(CURL *h, int sock, const void *buf, size_t n, int timeout_ms)
{
        const char *p = buf;

        while (n > 0) {
                size_t sent = 0;
                CURLcode rc = curl_easy_send(h, p, n, &sent);
                if (rc == CURLE_AGAIN) {
                        struct pollfd pfd = {.fd = sock, .events = POLLOUT};
                        if (poll(&pfd, 1, timeout_ms) <= 0)
                                return -EIO;
                        continue;
                }
                if (rc != CURLE_OK)
                        return -EIO;
                p += sent;
                n -= sent;
        }
        return 0;
}

/* Read the answer's head into @head (@cap bytes with the NUL) to its blank line, within @until
 * (sbx_now_ms()). Return the head's end (its blank line) with *@n the bytes read, or NULL with
 * @err. */
static char *read_head(CURL *h, int sock, const char *what, uint64_t until, int head_ms, char *head,
                       size_t cap, size_t *n, struct sbx_error *err)
{
        char *end = NULL;

        *n = 0;
        while (!end) {
                size_t got = 0;
                CURLcode rc = curl_easy_recv(h, head + *n, cap - 1 - *n, &got);
                if (rc == CURLE_AGAIN) {
                        struct pollfd p = {.fd = sock, .events = POLLIN};
                        uint64_t now = sbx_now_ms();
                        if (now >= until || poll(&p, 1, (int)(until - now)) <= 0) {
                                sbx_fail(err, ETIMEDOUT,
                                         "the container engine did not answer the request to %s "
                                         "within %d s: check the engine (`docker info`), then "
                                         "retry",
                                         what, head_ms / 1000);
                                return NULL;
                        }
                        continue;
                }
                if (rc != CURLE_OK || got == 0) {
                        sbx_fail(err, EPROTO,
                                 "the container engine closed the connection to %s before "
                                 "answering: retry",
                                 what);
                        return NULL;
                }
                *n += got;
                head[*n] = '\0';
                end = strstr(head, "\r\n\r\n");
                if (!end && *n >= cap - 1) {
                        sbx_fail(err, EPROTO, "the container engine's answer to %s is too long",
                                 what);
                        return NULL;
                }
        }
        return end;
}

int engine_hijack(const struct engine_conn *c, const char *path, const char *body, const char *what,
                  int head_ms, CURL **ret_h, int *ret_sock, char rest[ENGINE_HIJACK_REST],
                  size_t *rest_n, struct sbx_error *err)
{
        _cleanup_free_ char *req = NULL;
        curl_socket_t sock = CURL_SOCKET_BAD;
        char head[ENGINE_HIJACK_REST + 1];
        size_t n = 0;
        uint64_t until = sbx_now_ms() + (uint64_t)head_ms;
        char *end;
        CURLcode rc;

        *ret_sock = -1;
        *rest_n = 0;
        *ret_h = engine_easy_new(c, path, false);
        curl_easy_setopt(*ret_h, CURLOPT_CONNECT_ONLY, 1L);
        rc = curl_easy_perform(*ret_h);
        if (rc == CURLE_OK)
                rc = curl_easy_getinfo(*ret_h, CURLINFO_ACTIVESOCKET, &sock);
        if (rc != CURLE_OK || sock == CURL_SOCKET_BAD)
                return sbx_fail(err, ECONNREFUSED,
                                "cannot reach the container engine to %s (%s): check "
                                "DOCKER_HOST and the engine, then retry",
                                what, curl_easy_strerror(rc));
        *ret_sock = (int)sock;
        req = xasprintf("POST %s HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\n"
                        "Upgrade: tcp\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\n\r\n%s",
                        path, body ? strlen(body) : 0, body ? body : "");
        if (engine_hijack_send(*ret_h, *ret_sock, req, strlen(req), head_ms) < 0)
                return sbx_fail(err, EIO, "the request to %s could not be sent", what);
        end = read_head(*ret_h, *ret_sock, what, until, head_ms, head, sizeof(head), &n, err);
        if (!end)
                return -err->code;
        if (strncmp(head, "HTTP/1.1 101", 12) != 0 && strncmp(head, "HTTP/1.1 200", 12) != 0 &&
            strncmp(head, "HTTP/1.0 200", 12) != 0)
                return sbx_fail(err, EPROTO, "the container engine refused to %s: %.200s", what,
                                head);
        end += 4;
        *rest_n = (size_t)(head + n - end);
        memcpy(rest, end, *rest_n);
        return 0;
}

int engine_exec_create(const struct engine_conn *c, const char *id, const struct engine_exec *x,
                       char ret[72], struct sbx_error *err)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        _cleanup_(json_putp) json_object *b = json_object_new_object();
        json_object *cmd = json_object_new_array();
        _cleanup_free_ char *what = xasprintf("create %s", x->what);
        char user[32];
        const char *eid;
        int r;

        snprintf(user, sizeof(user), "%u:%u", (unsigned)x->uid, (unsigned)x->uid);
        for (size_t i = 0; x->argv[i]; i++)
                json_object_array_add(cmd, json_object_new_string(x->argv[i]));
        if (x->env) {
                json_object *env = json_object_new_array();
                for (size_t i = 0; x->env[i]; i++)
                        json_object_array_add(env, json_object_new_string(x->env[i]));
                json_object_object_add(b, "Env", env);
        }
        json_object_object_add(b, "AttachStdin", json_object_new_boolean(true));
        json_object_object_add(b, "AttachStdout", json_object_new_boolean(true));
        json_object_object_add(b, "AttachStderr", json_object_new_boolean(false));
        json_object_object_add(b, "Tty", json_object_new_boolean(false));
        json_object_object_add(b, "User", json_object_new_string(user));
        json_object_object_add(b, "Cmd", cmd);
        r = engine_post(c,
                        &(struct engine_call){.path = "/containers/{}/exec",
                                              .parts = {id},
                                              .json = json_object_to_json_string(b),
                                              .ok = {201},
                                              .body = ENGINE_BODY_JSON,
                                              .timeout_ms = 30000,
                                              .what = what},
                        &rep, err);
        if (r < 0)
                return r;
        eid = json_object_get_string(engine_jget(rep.json, "Id"));
        if (!eid || !*eid || strlen(eid) > 64 ||
            strspn(eid, "0123456789abcdefABCDEF") != strlen(eid))
                return sbx_fail(err, EPROTO, "the engine's exec id is not an id: '%.80s'",
                                eid ? eid : "");
        snprintf(ret, 72, "%s", eid);
        return 0;
}

int engine_exec_hijack(const struct engine_conn *c, const char *eid, const char *what, int head_ms,
                       CURL **ret_h, int *ret_sock, char rest[ENGINE_HIJACK_REST], size_t *rest_n,
                       struct sbx_error *err)
{
        static const char body[] = "{\"Detach\":false,\"Tty\":false}";
        _cleanup_free_ char *path = c->api[0] ? xasprintf("/v%s/exec/%s/start", c->api, eid)
                                              : xasprintf("/exec/%s/start", eid);

        return engine_hijack(c, path, body, what, head_ms, ret_h, ret_sock, rest, rest_n, err);
}
