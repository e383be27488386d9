/* egress.c - the egress allowlist settings: VESTIBULE_EGRESS_ALLOW, VESTIBULE_EGRESS_PORTS and
 * VESTIBULE_EGRESS_PIN parsed into struct sbx_egress, and the name matcher the proxy uses
 * (docs/design/egress.md). Parsed here, not in src/egress, so that an invalid value blocks
 * every call like any other setting, and the proxy process reads the very same rules. */
#include "config/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

#define EGRESS_MAX_ITEMS 256
#define EGRESS_NAME_MAX 253

/* The next item of @s (separated by ',' or blanks) into @buf; NULL at the end. */
static const char *next_item(const char *s, char *buf, size_t size, bool *too_long)
{
        size_t n = 0;

        while (*s == ',' || isspace((unsigned char)*s))
                s++;
        if (!*s)
                return NULL;
        *too_long = false;
        while (*s && *s != ',' && !isspace((unsigned char)*s)) {
                if (n + 1 < size)
                        buf[n++] = *s;
                else
                        *too_long = true;
                s++;
        }
        buf[n] = '\0';
        return s;
}

/* A host name (letters, digits, '-', '.'; labels 1..63) or an IP literal, lower-cased in
 * place, trailing dot dropped. */
static bool host_ok(char *h)
{
        struct in6_addr a6;
        size_t n = strlen(h), label = 0;

        if (n && h[n - 1] == '.')
                h[--n] = '\0';
        if (n == 0 || n > EGRESS_NAME_MAX)
                return false;
        if (strchr(h, ':'))
                return inet_pton(AF_INET6, h, &a6) == 1;
        for (size_t i = 0; i < n; i++) {
                char c = (char)tolower((unsigned char)h[i]);
                h[i] = c;
                if (c == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!isalnum((unsigned char)c) && c != '-')
                        return false;
                if (++label > 63)
                        return false;
        }
        return true;
}

void config_egress_done(struct sbx_egress *e)
{
        if (!e)
                return;
        for (size_t i = 0; i < e->n_rules; i++)
                free(e->rules[i].name);
        for (size_t i = 0; i < e->n_pins; i++)
                free(e->pins[i].host);
        free(e->rules);
        free(e->ports);
        free(e->pins);
        free(e->allow_raw);
        free(e->ports_raw);
        free(e->pin_raw);
        memset(e, 0, sizeof(*e));
}

bool config_egress_allows(const struct sbx_egress *e, const char *host)
{
        size_t hn = strlen(host);

        for (size_t i = 0; i < e->n_rules; i++) {
                const char *r = e->rules[i].name;
                size_t rn = strlen(r);

                if (strcmp(r, host) == 0)
                        return true;
                if (e->rules[i].suffix && hn > rn + 1 && host[hn - rn - 1] == '.' &&
                    strcmp(host + hn - rn, r) == 0)
                        return true;
        }
        return false;
}

const struct sbx_egress_pin *config_egress_pin(const struct sbx_egress *e, const char *host)
{
        for (size_t i = 0; i < e->n_pins; i++)
                if (strcmp(e->pins[i].host, host) == 0)
                        return &e->pins[i];
        return NULL;
}

static int parse_allow(const char *v, struct sbx_egress *e, struct sbx_error *err)
{
        char item[EGRESS_NAME_MAX + 8] = {0};
        bool too_long;

        while (v && (v = next_item(v, item, sizeof(item), &too_long))) {
                char *h = item;
                bool suffix = false;

                if (h[0] == '*' && h[1] == '.')
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_ALLOW: '%.80s' is a wildcard; write "
                                        "'%.80s' for a domain and every name under it",
                                        item, item + 1);
                if (h[0] == '.') {
                        suffix = true;
                        h++;
                }
                if (too_long || !host_ok(h) || (suffix && strchr(h, ':')))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_ALLOW: '%.80s' is not a host name, a "
                                        "'.suffix' or an IP address; list names like "
                                        "'pypi.org,.pythonhosted.org'",
                                        item);
                if (e->n_rules >= EGRESS_MAX_ITEMS)
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_ALLOW: more than %d entries; use "
                                        "'.suffix' patterns",
                                        EGRESS_MAX_ITEMS);
                GREEDY_REALLOC(e->rules, e->cap_rules, e->n_rules + 1);
                e->rules[e->n_rules].name = xstrdup(h);
                e->rules[e->n_rules].suffix = suffix;
                e->n_rules++;
        }
        return 0;
}

static bool parse_port(const char *s, uint16_t *ret)
{
        unsigned long n = 0;

        if (!*s || strlen(s) > 5)
                return false;
        for (const char *p = s; *p; p++) {
                if (!isdigit((unsigned char)*p))
                        return false;
                n = n * 10 + (unsigned long)(*p - '0');
        }
        if (n == 0 || n > 65535)
                return false;
        *ret = (uint16_t)n;
        return true;
}

static int parse_ports(const char *v, struct sbx_egress *e, struct sbx_error *err)
{
        char item[32] = {0};
        bool too_long;

        if (!v || !*v)
                v = "443,80";
        while ((v = next_item(v, item, sizeof(item), &too_long))) {
                uint16_t port;
                if (too_long || !parse_port(item, &port))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PORTS: '%.31s' is not a port number "
                                        "1..65535; list ports like '443,80'",
                                        item);
                if (e->n_ports >= 64)
                        return sbx_fail(err, EINVAL, "VESTIBULE_EGRESS_PORTS: more than 64 ports");
                GREEDY_REALLOC(e->ports, e->cap_ports, e->n_ports + 1);
                e->ports[e->n_ports++] = port;
        }
        if (e->n_ports == 0)
                return sbx_fail(err, EINVAL,
                                "VESTIBULE_EGRESS_PORTS: no port listed; list ports like '443,80'");
        return 0;
}

static int parse_pins(const char *v, struct sbx_egress *e, struct sbx_error *err)
{
        char item[EGRESS_NAME_MAX + 80] = {0};
        bool too_long;

        while (v && (v = next_item(v, item, sizeof(item), &too_long))) {
                char *eq = strchr(item, '='), *addr, *port = NULL;
                struct sbx_egress_pin pin = {0};
                unsigned char buf[sizeof(struct in6_addr)];

                if (too_long || !eq)
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: '%.80s' is not host=address:port; "
                                        "write e.g. 'pypi.example=127.0.0.1:3141'",
                                        item);
                *eq = '\0';
                addr = eq + 1;
                if (!host_ok(item) || strchr(item, ':'))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: '%.80s' is not a host name; write "
                                        "e.g. 'pypi.example=127.0.0.1:3141'",
                                        item);
                if (addr[0] == '[') {
                        char *close = strchr(addr, ']');
                        if (!close || (close[1] && close[1] != ':'))
                                return sbx_fail(err, EINVAL,
                                                "VESTIBULE_EGRESS_PIN: '%.80s' for '%.80s': write "
                                                "an IPv6 address as [addr]:port",
                                                addr, item);
                        *close = '\0';
                        if (close[1] == ':')
                                port = close + 2;
                        addr++;
                } else if ((port = strchr(addr, ':'))) {
                        *port++ = '\0';
                }
                if ((inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1) ||
                    strlen(addr) >= sizeof(pin.addr))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: '%.80s' for '%.80s' is not a "
                                        "numeric IP address",
                                        addr, item);
                if (port && !parse_port(port, &pin.port))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: port '%.16s' for '%.80s' is not "
                                        "1..65535",
                                        port, item);
                if (!config_egress_allows(e, item))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: '%.80s' is pinned but not in "
                                        "VESTIBULE_EGRESS_ALLOW; a pin says where, the "
                                        "allowlist says whether: add it there too",
                                        item);
                if (config_egress_pin(e, item))
                        return sbx_fail(err, EINVAL,
                                        "VESTIBULE_EGRESS_PIN: '%.80s' is pinned twice", item);
                if (e->n_pins >= EGRESS_MAX_ITEMS)
                        return sbx_fail(err, EINVAL, "VESTIBULE_EGRESS_PIN: more than %d pins",
                                        EGRESS_MAX_ITEMS);
                pin.host = xstrdup(item);
                snprintf(pin.addr, sizeof(pin.addr), "%s", addr);
                GREEDY_REALLOC(e->pins, e->cap_pins, e->n_pins + 1);
                e->pins[e->n_pins++] = pin;
        }
        return 0;
}

int config_egress_parse(const char *allow, const char *ports, const char *pin,
                        struct sbx_egress *ret, struct sbx_error *err)
{
        struct sbx_egress e = {
            .allow_raw = xstrdup(allow ? allow : ""),
            .ports_raw = xstrdup(ports ? ports : ""),
            .pin_raw = xstrdup(pin ? pin : ""),
        };
        int r;

        r = parse_allow(e.allow_raw, &e, err);
        if (r >= 0)
                r = parse_ports(e.ports_raw, &e, err);
        if (r >= 0)
                r = parse_pins(e.pin_raw, &e, err);
        if (r < 0) {
                config_egress_done(&e);
                return r;
        }
        config_egress_done(ret);
        *ret = e;
        return 0;
}
