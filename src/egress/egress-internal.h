/* egress-internal.h - the pieces of the proxy that tests and the fuzz target reach directly:
 * the request-head parser, the address classifier, the decision, and the record format
 * between the proxy process and the server (docs/design/egress.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/config.h"

/* Why a request was refused. The text is what the result, the audit and the 403 body say. */
enum egress_reason {
        EGRESS_WHY_OK = 0,
        EGRESS_WHY_NOT_ALLOWED, /* "not in VESTIBULE_EGRESS_ALLOW" */
        EGRESS_WHY_PORT,        /* "port not allowed" */
        EGRESS_WHY_PRIVATE,     /* "resolves to a private address" */
        EGRESS_WHY_LITERAL,     /* "IP literal not in the allowlist" */
        EGRESS_WHY_NO_RESOLVE,  /* "name does not resolve" */
        EGRESS_WHY_CONNECT,     /* "connection failed" */
        EGRESS_WHY_BAD_REQUEST, /* "not an HTTP proxy request" */
        EGRESS_WHY_NO_HEAD,     /* "request head never completed" (slow or silent) */
        EGRESS_WHY_NO_NETWORK,  /* the server itself has no network (--network none) */
        EGRESS_WHY_COUNT,
};

/** egress_reason_text() - the words for @r (static); NULL for EGRESS_WHY_OK or out of range. */
const char *egress_reason_text(enum egress_reason r);

/* One request head, parsed. @host is lower case, without brackets for IPv6. */
struct egress_request {
        bool connect; /* CONNECT host:port, else an absolute-URI http:// request */
        char host[256];
        uint16_t port;
        bool host_is_ip; /* an IPv4 or IPv6 literal */
        size_t head_len; /* bytes of the head, through the blank line */
        /* absolute-URI only: where the method ends, and the origin-form target ("/path?q")
         * inside the caller's buffer, which replaces the absolute URI upstream */
        size_t method_len;
        size_t target_off, target_len;   /* the path within the buffer; 0 long = "/" */
        size_t version_off, version_len; /* "HTTP/1.1" */
        size_t line_end;                 /* offset of the request line's end ("\r\n" or "\n") */
};

/**
 * egress_parse_request() - parse an HTTP/1.x proxy request head from @buf (@len bytes, not
 * NUL-terminated, untrusted). CONNECT host:port, or METHOD http://host[:port][/path] HTTP/1.x.
 * Return: 1 with @ret filled when a complete head (ending in an empty line) is there, 0 when
 * more bytes are needed (and @len < EGRESS_MAX_HEAD_BYTES), -EINVAL for a malformed head,
 * -EPROTONOSUPPORT for another scheme (https:// without CONNECT), -E2BIG past the head limit.
 */
int egress_parse_request(const char *buf, size_t len, struct egress_request *ret);

/**
 * egress_request_body() - the body length of the absolute-form request @rq (parsed from @buf by
 * egress_parse_request()), so that the proxy relays that request and nothing after it (a next
 * request on the connection would never be judged). Header lines are checked as RFC 9112
 * sections 5 and 6.3 ask of a server: no line folding (obs-fold), no bare CR, no blanks
 * between a field name and its colon. *@ret_len: the Content-Length (repeated ones must agree),
 * 0 when there is none. Return: 0; -EINVAL for a line or a Content-Length that breaks those
 * rules (no digits, a sign, a list, over 18 digits, two that differ); -EOPNOTSUPP for a
 * Transfer-Encoding (a chunked body, whose end only its framing tells: refused rather than
 * relayed without a bound).
 */
int egress_request_body(const char *buf, const struct egress_request *rq, int64_t *ret_len);

/**
 * egress_upstream_head() - the head an absolute-URI request @rq (parsed from @buf) is sent
 * upstream with: the origin-form target, "Host:" the authority the request was decided on
 * (the code's own Host lines dropped: RFC 9112 section 3.2.2 makes the absolute-form's
 * authority win), hop-by-hop and Proxy-* headers dropped, and "Connection: close". Return: a new
 * buffer of *@ret_len bytes (not NUL-terminated); freed by the caller.
 */
char *egress_upstream_head(const char *buf, const struct egress_request *rq, size_t *ret_len);

/**
 * egress_answer_head_end() - the length of the response head at the start of @buf (@len bytes,
 * untrusted, from the upstream): up to and with its blank line ("\r\n\r\n" or "\n\n"), or 0
 * when it has not ended within @len.
 */
size_t egress_answer_head_end(const char *buf, size_t len);

/**
 * egress_answer_head() - the response head @buf (@head_len bytes, from
 * egress_answer_head_end()) as the proxy sends it to the client of a plain-http exchange, after
 * which it ends the connection: the upstream's Connection, Keep-Alive and Proxy-Connection lines
 * dropped (hop-by-hop, RFC 9110 section 7.6.1) and "Connection: close" and "Proxy-Connection:
 * close" added, so the client does not pool the connection. An interim 1xx head is returned as
 * it is. Return: a new buffer of *@ret_len bytes (not NUL-terminated); freed by the caller.
 */
char *egress_answer_head(const char *buf, size_t head_len, size_t *ret_len);

/**
 * egress_addr_class() - why @sa must not be reached by name: "loopback", "private",
 * "link-local", "cloud metadata", "multicast", "reserved", "unspecified", "shared (CGNAT)";
 * or NULL for a public address. IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6
 * addresses are judged by the IPv4 address inside. Sources: RFC 6890 (special-purpose
 * registries), RFC 4193 (fc00::/7), RFC 6052 (NAT64); 169.254.169.254 and fd00:ec2::254 are
 * the cloud metadata services (AWS EC2 instance metadata documentation).
 */
const char *egress_addr_class(const struct sockaddr *sa);

/**
 * egress_decide_name() - the verdict on @req before any connection: the name or literal
 * against the allowlist, then the port. Pins and private addresses are judged when
 * resolving (the proxy). Return EGRESS_WHY_OK, EGRESS_WHY_NOT_ALLOWED, EGRESS_WHY_LITERAL or
 * EGRESS_WHY_PORT.
 */
enum egress_reason egress_decide_name(const struct sbx_egress *pol,
                                      const struct egress_request *req);

/* Record lines the proxy appends to its record file (one write(2) each, O_APPEND):
 *   "D <id> <allowed 0|1> <port> <reason number> <host>\n"  a decision
 *   "C <id> <bytes up> <bytes down>\n"                        a connection's end
 *   "M <decisions not recorded>\n"                            at a clean exit
 * <host> holds only [a-z0-9.:-] (anything else was refused as a bad request and recorded as
 * "-"). egress_records_parse() folds them into the run's verdicts. */
struct run_egress;
/** egress_records_parse() - fold the record text @buf (@len bytes) into @ret's entries. */
void egress_records_parse(const char *buf, size_t len, struct run_egress *ret);

/**
 * egress_proxy_confine() - confine the calling proxy process (src/egress/confine.c): not
 * dumpable (prctl(2) PR_SET_DUMPABLE: no process of its uid can ptrace it, read its
 * /proc/PID/fd or take its fds with pidfd_getfd(2)), no_new_privs, and a seccomp filter
 * (seccomp_init(3)) that refuses exec, ptrace and the cross-process calls, namespaces, mounts,
 * BPF, keys, uid/gid changes, socketpair, and socket(2) of any family but AF_INET, AF_INET6
 * and AF_NETLINK (getaddrinfo(3)'s). Call once, before the first byte from the sandbox; it
 * applies to every thread started after it.
 * Return: 0, or -errno (the proxy then refuses to start: fail closed).
 */
int egress_proxy_confine(void);
