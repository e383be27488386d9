/* addr.c - which addresses a name may never lead to (the proxy refuses them unless the user
 * pinned the name): the special-purpose blocks of RFC 6890 that are not the public Internet.
 * A resolver answer is untrusted: a public name can resolve to 127.0.0.1 or to the cloud
 * metadata service (DNS rebinding), so every address of the answer is judged. */
#include "egress/egress-internal.h"

#include <netinet/in.h>
#include <string.h>

static const char *v4_class(uint32_t a)
{
        static const struct {
                uint32_t net, mask;
                const char *why;
        } blocks[] = {
            {0xA9FEA9FE, 0xFFFFFFFF, "cloud metadata"}, /* 169.254.169.254 */
            {0x00000000, 0xFF000000, "unspecified"},    /* 0.0.0.0/8 */
            {0x0A000000, 0xFF000000, "private"},        /* 10/8 */
            {0x64400000, 0xFFC00000, "shared (CGNAT)"}, /* 100.64/10 */
            {0x7F000000, 0xFF000000, "loopback"},       /* 127/8 */
            {0xA9FE0000, 0xFFFF0000, "link-local"},     /* 169.254/16 */
            {0xAC100000, 0xFFF00000, "private"},        /* 172.16/12 */
            {0xC0000000, 0xFFFFFF00, "reserved"},       /* 192.0.0/24 (IETF protocol) */
            {0xC0000200, 0xFFFFFF00, "reserved"},       /* 192.0.2/24 TEST-NET-1 */
            {0xC0A80000, 0xFFFF0000, "private"},        /* 192.168/16 */
            {0xC6120000, 0xFFFE0000, "reserved"},       /* 198.18/15 benchmarking */
            {0xC6336400, 0xFFFFFF00, "reserved"},       /* 198.51.100/24 TEST-NET-2 */
            {0xCB007100, 0xFFFFFF00, "reserved"},       /* 203.0.113/24 TEST-NET-3 */
            {0xE0000000, 0xF0000000, "multicast"},      /* 224/4 */
            {0xF0000000, 0xF0000000, "reserved"},       /* 240/4 and 255.255.255.255 */
        };

        for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
                if ((a & blocks[i].mask) == blocks[i].net)
                        return blocks[i].why;
        return NULL;
}

const char *egress_addr_class(const struct sockaddr *sa)
{
        static const uint8_t metadata6[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                              0,    0,    0,    0,    0, 0, 0x02, 0x54};
        static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
        const uint8_t *b;

        if (!sa)
                return "unspecified";
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                return v4_class(ntohl(in->sin_addr.s_addr));
        }
        if (sa->sa_family != AF_INET6)
                return "reserved";
        b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(b, metadata6, 16) == 0)
                return "cloud metadata";
        /* ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible, and :: and ::1), 64:ff9b::a.b.c.d */
        {
                static const uint8_t zero[10] = {0};
                bool mapped = memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff;
                bool compat = memcmp(b, zero, 10) == 0 && b[10] == 0 && b[11] == 0;
                if (compat) {
                        uint32_t v = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
                                     (uint32_t)b[14] << 8 | b[15];
                        if (v == 0)
                                return "unspecified";
                        if (v == 1)
                                return "loopback";
                        return "reserved"; /* deprecated form: never a real destination */
                }
                if (mapped || memcmp(b, nat64, 12) == 0) {
                        uint32_t v = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
                                     (uint32_t)b[14] << 8 | b[15];
                        const char *w = v4_class(v);
                        return w;
                }
        }
        if ((b[0] & 0xfe) == 0xfc)
                return "private"; /* fc00::/7 unique local */
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
                return "link-local"; /* fe80::/10 */
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
                return "private"; /* fec0::/10 site-local (deprecated) */
        if (b[0] == 0xff)
                return "multicast";
        if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
                return "reserved"; /* 2001:db8::/32 documentation */
        if (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, "\0\0\0\0\0\0", 6) == 0)
                return "reserved"; /* 100::/64 discard */
        return NULL;
}
