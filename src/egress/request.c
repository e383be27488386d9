/* request.c - the proxy's parser of a request head (RFC 9112 section 3: the request line;
 * RFC 9110 section 9.3.6: CONNECT with an authority-form target; absolute-form targets for
 * plain HTTP). Untrusted bytes from the sandbox: every read is bounded by @len, nothing is
 * assumed NUL-terminated; the fuzz target tests/fuzz/fuzz_egress.c drives it. */
#include "egress/egress-internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "egress/egress.h"

/* The end of the head: offset just past the empty line, or 0 when there is none yet. */
static size_t head_end(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < len && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

static bool host_char(char c)
{
        return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* Parse an authority "host[:port]" or "[v6][:port]" of @n bytes into @ret. @need_port: a
 * CONNECT target must name its port. */
static int parse_authority(const char *a, size_t n, bool need_port, uint16_t def_port,
                           struct egress_request *ret)
{
        const char *host = a, *port = NULL;
        size_t hn, pn = 0;
        unsigned long p = 0;
        unsigned char bin[sizeof(struct in6_addr)];

        if (n == 0 || memchr(a, '@', n))
                return -EINVAL; /* no userinfo */
        if (a[0] == '[') {
                const char *close = memchr(a, ']', n);
                if (!close)
                        return -EINVAL;
                host = a + 1;
                hn = (size_t)(close - host);
                if (close + 1 < a + n) {
                        if (close[1] != ':')
                                return -EINVAL;
                        port = close + 2;
                        pn = (size_t)(a + n - port);
                }
                if (hn == 0 || hn >= INET6_ADDRSTRLEN)
                        return -EINVAL;
                memcpy(ret->host, host, hn);
                ret->host[hn] = '\0';
                for (size_t i = 0; i < hn; i++)
                        ret->host[i] = (char)tolower((unsigned char)ret->host[i]);
                if (inet_pton(AF_INET6, ret->host, bin) != 1)
                        return -EINVAL;
                ret->host_is_ip = true;
        } else {
                const char *colon = memchr(a, ':', n);
                hn = colon ? (size_t)(colon - a) : n;
                if (colon) {
                        port = colon + 1;
                        pn = n - hn - 1;
                }
                if (hn && a[hn - 1] == '.')
                        hn--; /* "example.com." is example.com */
                if (hn == 0 || hn > 253)
                        return -EINVAL;
                for (size_t i = 0; i < hn; i++) {
                        if (!host_char(a[i]))
                                return -EINVAL;
                        ret->host[i] = (char)tolower((unsigned char)a[i]);
                }
                ret->host[hn] = '\0';
                if (ret->host[0] == '.' || strstr(ret->host, ".."))
                        return -EINVAL;
                /* inet_aton's forms too ("127.1", "2130706433"): numbers, not names */
                struct in_addr v4;
                ret->host_is_ip = inet_aton(ret->host, &v4) != 0;
        }
        if (port) {
                if (pn == 0 || pn > 5)
                        return -EINVAL;
                for (size_t i = 0; i < pn; i++) {
                        if (!isdigit((unsigned char)port[i]))
                                return -EINVAL;
                        p = p * 10 + (unsigned long)(port[i] - '0');
                }
                if (p == 0 || p > 65535)
                        return -EINVAL;
                ret->port = (uint16_t)p;
        } else if (need_port) {
                return -EINVAL;
        } else {
                ret->port = def_port;
        }
        return 0;
}

int egress_parse_request(const char *buf, size_t len, struct egress_request *ret)
{
        struct egress_request r = {0};
        size_t end, i, line_end, m, t0, t1;

        end = head_end(buf, len > EGRESS_MAX_HEAD_BYTES ? EGRESS_MAX_HEAD_BYTES : len);
        if (end == 0)
                return len >= EGRESS_MAX_HEAD_BYTES ? -E2BIG : 0;
        line_end = (size_t)((const char *)memchr(buf, '\n', end) - buf);
        if (line_end > 0 && buf[line_end - 1] == '\r')
                line_end--;

        /* method SP target SP HTTP/1.x */
        for (m = 0; m < line_end && isupper((unsigned char)buf[m]); m++)
                ;
        if (m == 0 || m > 16 || m >= line_end || buf[m] != ' ')
                return -EINVAL;
        t0 = m + 1;
        for (t1 = t0; t1 < line_end && buf[t1] != ' '; t1++)
                if ((unsigned char)buf[t1] <= 0x20 || (unsigned char)buf[t1] >= 0x7f)
                        return -EINVAL;
        if (t1 == t0 || t1 >= line_end)
                return -EINVAL;
        if (line_end - (t1 + 1) != 8 || memcmp(buf + t1 + 1, "HTTP/1.", 7) != 0 ||
            (buf[t1 + 8] != '0' && buf[t1 + 8] != '1'))
                return -EINVAL;
        r.version_off = t1 + 1;
        r.version_len = 8;
        r.method_len = m;
        r.line_end = line_end;
        r.head_len = end;

        if (m == 7 && memcmp(buf, "CONNECT", 7) == 0) {
                r.connect = true;
                if (parse_authority(buf + t0, t1 - t0, true, 0, &r) < 0)
                        return -EINVAL;
                *ret = r;
                return 1;
        }
        if (t1 - t0 >= 8 && strncasecmp(buf + t0, "https://", 8) == 0)
                return -EPROTONOSUPPORT;
        if (t1 - t0 < 7 || strncasecmp(buf + t0, "http://", 7) != 0)
                return -EINVAL;
        i = t0 + 7;
        size_t a0 = i;
        while (i < t1 && buf[i] != '/' && buf[i] != '?' && buf[i] != '#')
                i++;
        if (parse_authority(buf + a0, i - a0, false, 80, &r) < 0)
                return -EINVAL;
        r.target_off = i;
        r.target_len = t1 - i;
        *ret = r;
        return 1;
}

int egress_request_body(const char *buf, const struct egress_request *rq, int64_t *ret_len)
{
        int64_t n = -1;
        bool te = false;
        size_t i;

        *ret_len = 0;
        /* the header lines: from after the request line to the blank line */
        i = (size_t)((const char *)memchr(buf, '\n', rq->head_len) - buf) + 1;
        while (i < rq->head_len) {
                const char *nl = memchr(buf + i, '\n', rq->head_len - i);
                size_t e = nl ? (size_t)(nl - buf) : rq->head_len, le = e, c, v, d;

                if (le > i && buf[le - 1] == '\r')
                        le--;
                if (le == i)
                        break; /* the blank line */
                /* obs-fold, a bare CR, no colon, or blanks before it: RFC 9112 5.1-5.2 */
                if (buf[i] == ' ' || buf[i] == '\t' || memchr(buf + i, '\r', le - i))
                        return -EINVAL;
                for (c = i; c < le && buf[c] != ':'; c++)
                        if (buf[c] == ' ' || buf[c] == '\t')
                                return -EINVAL;
                if (c == le || c == i)
                        return -EINVAL;
                if (c - i == 17 && strncasecmp(buf + i, "transfer-encoding", 17) == 0)
                        te = true;
                if (c - i == 14 && strncasecmp(buf + i, "content-length", 14) == 0) {
                        int64_t x = 0;

                        for (v = c + 1; v < le && (buf[v] == ' ' || buf[v] == '\t'); v++)
                                ;
                        for (d = v; d < le && d - v < 18 && buf[d] >= '0' && buf[d] <= '9'; d++)
                                x = x * 10 + (buf[d] - '0');
                        if (d == v)
                                return -EINVAL;
                        for (; d < le; d++)
                                if (buf[d] != ' ' && buf[d] != '\t')
                                        return -EINVAL; /* more digits, a list, a sign */
                        if (n >= 0 && n != x)
                                return -EINVAL; /* two lengths that differ */
                        n = x;
                }
                i = e + 1;
        }
        if (te)
                return -EOPNOTSUPP;
        *ret_len = n < 0 ? 0 : n;
        return 0;
}

/* the server image started with `docker run --network none` (docs/packaging.md) */
static const char no_network[] = "this server has no network but loopback (its container was "
                                 "started with --network none): the allowlist's proxy runs in "
                                 "the server; start it with a network";

const char *egress_reason_text(enum egress_reason r)
{
        static const char *const text[EGRESS_WHY_COUNT] = {
            [EGRESS_WHY_NOT_ALLOWED] = "not in VESTIBULE_EGRESS_ALLOW",
            [EGRESS_WHY_PORT] = "port not allowed",
            [EGRESS_WHY_PRIVATE] = "resolves to a private address",
            [EGRESS_WHY_LITERAL] = "IP literal not in the allowlist",
            [EGRESS_WHY_NO_RESOLVE] = "name does not resolve",
            [EGRESS_WHY_CONNECT] = "connection failed",
            [EGRESS_WHY_BAD_REQUEST] = "not an HTTP proxy request",
            [EGRESS_WHY_NO_HEAD] = "request head never completed",
            [EGRESS_WHY_NO_NETWORK] = no_network,
        };
        if ((unsigned)r >= EGRESS_WHY_COUNT)
                return NULL;
        return text[r];
}

enum egress_reason egress_decide_name(const struct sbx_egress *pol,
                                      const struct egress_request *req)
{
        bool port_ok = false;

        if (!config_egress_allows(pol, req->host))
                return req->host_is_ip ? EGRESS_WHY_LITERAL : EGRESS_WHY_NOT_ALLOWED;
        for (size_t i = 0; i < pol->n_ports; i++)
                if (pol->ports[i] == req->port)
                        port_ok = true;
        return port_ok ? EGRESS_WHY_OK : EGRESS_WHY_PORT;
}
