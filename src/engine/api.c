/* api.c - the Engine API calls: the request target built from a template whose parts are
 * percent-encoded here (never by the callers), one transfer over libcurl (http.c sets up the
 * connection), and the one check of the answer's status, with errors that name the fix
 * (https://docs.docker.com/engine/api/v1.43/; docs/design/engine-api.md). */
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/xalloc.h"

/* A JSON or raw answer bigger than this is no answer we would ever parse: the transfer stops. */
#define ENGINE_REPLY_MAX_BYTES (64u << 20)
#define ENGINE_ERRBODY_MAX 1024 /* the start of a refused answer's body, for its message */

/* ---------------------------------------------------------------------------------------- */
/* The request target                                                                       */

bool engine_unreserved(unsigned char ch)
{
        return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
               ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

bool engine_dot_piece(const char *s, size_t n)
{
        size_t start = 0;

        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '/')
                        continue;
                size_t len = i - start;
                if ((len == 1 && s[start] == '.') ||
                    (len == 2 && s[start] == '.' && s[start + 1] == '.'))
                        return true;
                start = i + 1;
        }
        return false;
}

/* Whether @n bytes of @s may be a path part (@query false) or a query value. */
static int escape_check(const char *s, size_t n, bool query, struct sbx_error *err)
{
        const char *kind = query ? "query value" : "path part";

        if (n > ENGINE_PART_MAX_BYTES)
                return sbx_fail(err, ENAMETOOLONG,
                                "refusing an Engine API %s of %zu bytes (at most %d): an id or "
                                "name that long is not one the engine gave",
                                kind, n, ENGINE_PART_MAX_BYTES);
        if (memchr(s, '\0', n))
                return sbx_fail(err, EINVAL,
                                "refusing an Engine API %s holding a NUL byte ('%.80s'): no id, "
                                "name or path of the engine holds one",
                                kind, s);
        if (!query && (n == 0 || engine_dot_piece(s, n)))
                return sbx_fail(err, EINVAL,
                                "refusing the Engine API path part '%.*s': it is empty or holds a "
                                "'.' or '..' piece, which the engine would resolve to another "
                                "endpoint; this is a bug in Vestibule, report it",
                                (int)(n > 200 ? 200 : n), s);
        return 0;
}

int engine_escape(const char *s, size_t n, bool query, char **ret, struct sbx_error *err)
{
        static const char hex[] = "0123456789ABCDEF";
        char *out, *p;
        int r;

        r = escape_check(s, n, query, err);
        if (r < 0)
                return r;
        out = p = xmalloc(n * 3 + 1);
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (engine_unreserved(ch)) {
                        *p++ = (char)ch;
                } else {
                        *p++ = '%';
                        *p++ = hex[ch >> 4];
                        *p++ = hex[ch & 15];
                }
        }
        *p = '\0';
        *ret = out;
        return 0;
}

int engine_call_target(const struct engine_call *call, char **ret, struct sbx_error *err)
{
        _cleanup_(sbx_buf_done) struct sbx_buf out = {0}; /* no cap: parts are bounded */
        size_t used = 0;
        const char *t = call->path ? call->path : "";
        int r;

        while (*t) {
                const char *hole = strstr(t, "{}");
                size_t lit = hole ? (size_t)(hole - t) : strlen(t);
                _cleanup_free_ char *enc = NULL;
                (void)sbx_buf_add(&out, t, lit);
                if (!hole)
                        break;
                if (used >= ENGINE_CALL_MAX_PARTS || !call->parts[used])
                        return sbx_fail(err, EINVAL,
                                        "the Engine API path '%s' has more '{}' than parts: this "
                                        "is a bug in Vestibule, report it",
                                        call->path);
                const char *part = call->parts[used++];
                r = engine_escape(part, strlen(part), false, &enc, err);
                if (r < 0)
                        return r;
                (void)sbx_buf_puts(&out, enc);
                t = hole + 2;
        }
        if (used < ENGINE_CALL_MAX_PARTS && call->parts[used])
                return sbx_fail(err, EINVAL,
                                "the Engine API path '%s' has fewer '{}' than parts: this is a "
                                "bug in Vestibule, report it",
                                t);
        char sep = '?';
        for (size_t i = 0; i < ENGINE_CALL_MAX_QUERY && call->query[i].name; i++) {
                const struct engine_query *q = &call->query[i];
                _cleanup_free_ char *enc = NULL;
                if (!q->value)
                        continue;
                r = engine_escape(q->value, strlen(q->value), true, &enc, err);
                if (r < 0)
                        return r;
                (void)sbx_buf_printf(&out, "%c%s=%s", sep, q->name, enc);
                sep = '&';
        }
        *ret = sbx_buf_steal(&out, NULL);
        return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* One transfer                                                                             */

struct engine_xfer {
        const struct engine_conn *c;
        char method[8];
        struct engine_call call;
        char *target; /* for messages */
        CURL *h;
        struct curl_slist *hdrs;
        struct engine_reply *reply;
        bool headers_done;
        bool too_big;                     /* a JSON/raw answer past ENGINE_REPLY_MAX_BYTES */
        struct sbx_buf body;              /* JSON/raw answer, at most ENGINE_REPLY_MAX_BYTES */
        char errbody[ENGINE_ERRBODY_MAX]; /* the start of a refused answer */
        size_t errlen;
};

void engine_reply_done(struct engine_reply *r)
{
        if (!r)
                return;
        json_object_put(r->json);
        r->json = NULL;
        free(r->raw);
        r->raw = NULL;
        r->len = 0;
}

static bool status_ok(const struct engine_call *call, long status)
{
        if (call->any_status)
                return true;
        if (!call->ok[0])
                return status >= 200 && status <= 299;
        for (size_t i = 0; i < ENGINE_CALL_MAX_OK && call->ok[i]; i++)
                if (call->ok[i] == status)
                        return true;
        return false;
}

static void header_value(const char *line, size_t n, const char *name, char *ret, size_t size)
{
        size_t nl = strlen(name);
        if (n <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
                return;
        const char *v = line + nl + 1;
        size_t vn = n - nl - 1;
        while (vn && (*v == ' ' || *v == '\t'))
                v++, vn--;
        while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
                vn--;
        snprintf(ret, size, "%.*s", (int)vn, v);
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
        struct engine_xfer *x = ud;
        struct engine_reply *r = x->reply;
        size_t n = size * nmemb;

        if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
                const char *sp = memchr(data, ' ', n);
                r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
                x->headers_done = false; /* a 100 Continue is followed by the real status */
        } else if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
                x->headers_done = r->status >= 200;
        }
        header_value(data, n, "Api-Version", r->api_version, sizeof(r->api_version));
        header_value(data, n, "Libpod-Api-Version", r->libpod_api, sizeof(r->libpod_api));
        header_value(data, n, "Server", r->server, sizeof(r->server));
        return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
        struct engine_xfer *x = ud;
        size_t n = size * nmemb;

        if (!status_ok(&x->call, x->reply->status) || x->call.body == ENGINE_BODY_NONE) {
                /* keep the start: the engine's {"message": ...} */
                size_t room = sizeof(x->errbody) - 1 - x->errlen, take = n < room ? n : room;
                memcpy(x->errbody + x->errlen, data, take);
                x->errlen += take;
                x->errbody[x->errlen] = '\0';
                return n;
        }
        if (x->call.body == ENGINE_BODY_STREAM) {
                size_t took = x->call.on_data(x->call.userdata, data, n);
                if (took != n)
                        x->reply->stopped = true;
                return took == n ? n : 0;
        }
        if (sbx_buf_add(&x->body, data, n) < 0) {
                x->too_big = true;
                return 0;
        }
        return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
        struct engine_xfer *x = ud;
        ssize_t n;

        do
                n = read(x->call.upload_fd, buf, size * nmemb);
        while (n < 0 && errno == EINTR);
        return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

static int setup_upload(struct engine_xfer *x, struct sbx_error *err)
{
        off_t size = lseek(x->call.upload_fd, 0, SEEK_END);

        if (size < 0 || lseek(x->call.upload_fd, 0, SEEK_SET) < 0)
                return sbx_fail(err, errno, "cannot read the file to send to the engine (%s): %m",
                                x->call.what ? x->call.what : x->target);
        curl_easy_setopt(x->h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(x->h, CURLOPT_READDATA, x);
        if (strcmp(x->method, "PUT") == 0) {
                curl_easy_setopt(x->h, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(x->h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
        } else {
                curl_easy_setopt(x->h, CURLOPT_POST, 1L);
                curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
        }
        if (x->call.content_type) {
                _cleanup_free_ char *ct = xasprintf("Content-Type: %s", x->call.content_type);
                x->hdrs = curl_slist_append(x->hdrs, ct);
        }
        x->hdrs = curl_slist_append(x->hdrs, "Expect:"); /* no 100-continue round trip */
        return 0;
}

int engine_xfer_new(const struct engine_conn *c, const char *method, const struct engine_call *call,
                    struct engine_reply *ret, struct engine_xfer **ret_x, struct sbx_error *err)
{
        struct engine_xfer *x = xcalloc(1, sizeof(*x));
        int r;

        x->c = c;
        x->body.max = ENGINE_REPLY_MAX_BYTES;
        snprintf(x->method, sizeof(x->method), "%s", method);
        x->call = *call;
        x->reply = ret;
        memset(ret, 0, sizeof(*ret));
        r = engine_call_target(call, &x->target, err);
        if (r < 0) {
                free(x);
                return r;
        }
        x->h = engine_easy_new(c, x->target, !call->unversioned);
        if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(x->h, CURLOPT_NOBODY, 1L);
        else if (strcmp(method, "GET") != 0)
                curl_easy_setopt(x->h, CURLOPT_CUSTOMREQUEST, method);
        if (call->upload) {
                r = setup_upload(x, err);
                if (r < 0) {
                        engine_xfer_free(x);
                        return r;
                }
        } else if (call->json) {
                x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
                curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, call->json);
        } else if (strcmp(method, "POST") == 0) {
                curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, "");
        }
        for (size_t i = 0; call->headers && call->headers[i]; i++)
                x->hdrs = curl_slist_append(x->hdrs, call->headers[i]);
        if (x->hdrs)
                curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
        curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
        if (call->timeout_ms > 0)
                curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, call->timeout_ms);
        *ret_x = x;
        return 0;
}

void *engine_xfer_handle(struct engine_xfer *x)
{
        return x->h;
}

bool engine_xfer_headers_done(const struct engine_xfer *x)
{
        return x->headers_done;
}

long engine_xfer_status(const struct engine_xfer *x)
{
        return x->reply->status;
}

void engine_xfer_free(struct engine_xfer *x)
{
        if (!x)
                return;
        if (x->h)
                curl_easy_cleanup(x->h);
        curl_slist_free_all(x->hdrs);
        free(x->target);
        sbx_buf_done(&x->body);
        free(x);
}

/* ---------------------------------------------------------------------------------------- */
/* The one check of the answer                                                              */

/* The engine's {"message": "..."} of a refused answer, else the body's start. */
static void refusal_message(const char *body, char *ret, size_t size)
{
        _cleanup_(json_putp) json_object *j = body && *body ? json_tokener_parse(body) : NULL;
        json_object *m;

        if (j && json_object_object_get_ex(j, "message", &m))
                snprintf(ret, size, "%s", json_object_get_string(m));
        else
                snprintf(ret, size, "%.200s", body ? body : "");
        /* one line: the message goes into a tool result and a log line */
        for (char *p = ret; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
}

static int transfer_error(struct engine_xfer *x, CURLcode rc, long os_errno, struct sbx_error *err)
{
        const struct engine_conn *c = x->c;
        const char *what = x->call.what ? x->call.what : "answer";

        if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
                return engine_unreachable_error(&c->ep, (int)os_errno, curl_easy_strerror(rc), err);
        if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
            rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CACERT_BADFILE ||
            rc == CURLE_SSL_ISSUER_ERROR || rc == CURLE_SSL_CIPHER)
                return sbx_fail(err, EPROTO,
                                "the TLS handshake with the container engine at '%s' failed "
                                "(%s): check that DOCKER_CERT_PATH ('%s') holds the ca.pem that "
                                "signed the daemon's certificate (issued for this host name) "
                                "and a cert.pem/key.pem the daemon accepts",
                                c->ep.base_url, curl_easy_strerror(rc), c->ep.cert_dir);
        if (rc == CURLE_OPERATION_TIMEDOUT)
                return sbx_fail(err, ETIMEDOUT,
                                "the container engine at '%s' did not %s within %ld ms (%s %s): "
                                "check that it is healthy (restart it)",
                                c->ep.host, what, x->call.timeout_ms, x->method, x->target);
        if (x->too_big)
                return sbx_fail(err, EFBIG,
                                "the container engine at '%s' answered %s %s with more than %u "
                                "MiB: is this a Docker Engine or Podman socket?",
                                c->ep.host, x->method, x->target, ENGINE_REPLY_MAX_BYTES >> 20);
        return sbx_fail(err, EIO,
                        "talking to the container engine at '%s' failed (%s %s: %s): check that "
                        "it still runs",
                        c->ep.host, x->method, x->target, curl_easy_strerror(rc));
}

/* A status not in the call's list: the errno and the fix by the status's meaning. */
static int status_error(struct engine_xfer *x, struct sbx_error *err)
{
        long s = x->reply->status;
        const char *what = x->call.what ? x->call.what : "do that";
        const char *fix;
        int code;

        if (s == 400) {
                code = EINVAL;
                fix = "the engine found the request malformed: report this with the engine's "
                      "version";
        } else if (s == 401 || s == 403) {
                code = EACCES;
                fix = "the engine (or an authorization plugin) does not allow it for this user: "
                      "allow it, or use an engine this user may use";
        } else if (s == 404) {
                code = ENOENT;
                fix = "the engine has no such object (removed meanwhile?)";
        } else if (s == 409) {
                code = EBUSY;
                fix = "the object is in a state that forbids it (in use, or not running)";
        } else if (s >= 500) {
                code = EIO;
                fix = "the engine failed: see its log (journalctl -u docker, or podman's), then "
                      "retry";
        } else {
                code = EIO;
                fix = "an answer the Engine API does not document: is this a Docker Engine or "
                      "Podman socket?";
        }
        return sbx_fail(err, code,
                        "cannot %s: the container engine at '%s' answered %s %s with HTTP %ld "
                        "(%s); %s",
                        what, x->c->ep.host, x->method, x->target, s, x->reply->msg, fix);
}

int engine_xfer_finish(struct engine_xfer *x, int curl_result, struct sbx_error *err)
{
        struct engine_reply *r = x->reply;
        CURLcode rc = (CURLcode)curl_result;
        long os_errno = 0;

        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(x->h, CURLINFO_OS_ERRNO, &os_errno);
        if (rc == CURLE_WRITE_ERROR && r->stopped)
                rc = CURLE_OK; /* the caller's @on_data ended it: its call */
        if (rc != CURLE_OK)
                return transfer_error(x, rc, os_errno, err);
        if (!status_ok(&x->call, r->status)) {
                refusal_message(x->errbody, r->msg, sizeof(r->msg));
                return status_error(x, err);
        }
        if (x->call.body == ENGINE_BODY_NONE)
                refusal_message(x->errbody, r->msg, sizeof(r->msg));
        if (x->call.any_status && (r->status < 200 || r->status > 299)) {
                /* the caller judges the status: the message, and JSON only when it is JSON */
                if (x->call.body != ENGINE_BODY_NONE)
                        refusal_message(x->body.data, r->msg, sizeof(r->msg));
                if (x->call.body == ENGINE_BODY_JSON && x->body.len > 0)
                        r->json = json_tokener_parse(x->body.data);
                if (x->call.body != ENGINE_BODY_RAW)
                        return 0;
        }
        if (x->call.body == ENGINE_BODY_RAW) {
                r->raw = sbx_buf_steal(&x->body, &r->len);
        } else if (x->call.body == ENGINE_BODY_JSON && x->body.len > 0) {
                r->json = json_tokener_parse(x->body.data);
                if (!r->json)
                        return sbx_fail(err, EPROTO,
                                        "the container engine at '%s' answered %s %s with "
                                        "something that is not JSON ('%.80s'): is this a Docker "
                                        "Engine or Podman socket?",
                                        x->c->ep.host, x->method, x->target, x->body.data);
        }
        return 0;
}

int engine_call(const struct engine_conn *c, const char *method, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err)
{
        struct engine_xfer *x = NULL;
        int r;

        r = engine_xfer_new(c, method, call, ret, &x, err);
        if (r < 0)
                return r;
        r = engine_xfer_finish(x, curl_easy_perform(x->h), err);
        engine_xfer_free(x);
        return r;
}

int engine_get(const struct engine_conn *c, const struct engine_call *call,
               struct engine_reply *ret, struct sbx_error *err)
{
        return engine_call(c, "GET", call, ret, err);
}

int engine_post(const struct engine_conn *c, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err)
{
        return engine_call(c, "POST", call, ret, err);
}

int engine_put(const struct engine_conn *c, const struct engine_call *call,
               struct engine_reply *ret, struct sbx_error *err)
{
        return engine_call(c, "PUT", call, ret, err);
}

int engine_head(const struct engine_conn *c, const struct engine_call *call,
                struct engine_reply *ret, struct sbx_error *err)
{
        return engine_call(c, "HEAD", call, ret, err);
}

int engine_delete(const struct engine_conn *c, const struct engine_call *call,
                  struct engine_reply *ret, struct sbx_error *err)
{
        return engine_call(c, "DELETE", call, ret, err);
}
