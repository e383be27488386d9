/* utf8.c - strict UTF-8 decoding. */
#include "common/utf8.h"

#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

int sbx_utf8_decode(const void *s, size_t n, uint32_t *ret_cp)
{
        const unsigned char *p = s;
        uint32_t cp, min;
        int len;

        if (n == 0)
                return -1;
        if (p[0] < 0x80) {
                if (ret_cp)
                        *ret_cp = p[0];
                return 1;
        }
        if (p[0] >= 0xc2 && p[0] <= 0xdf) {
                len = 2;
                cp = p[0] & 0x1fu;
                min = 0x80;
        } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
                len = 3;
                cp = p[0] & 0x0fu;
                min = 0x800;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                len = 4;
                cp = p[0] & 0x07u;
                min = 0x10000;
        } else
                return 0; /* continuation byte, 0xc0/0xc1 (always overlong), 0xf5.. */

        for (int i = 1; i < len; i++) {
                if ((size_t)i >= n)
                        return -1;
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3fu);
                /* Reject early what can only end overlong, a surrogate, or above U+10FFFF, so
                 * a cut-short prefix of such a sequence is invalid rather than incomplete. */
                if (i == 1) {
                        uint32_t hi = cp << (6 * (len - 2));
                        if (len == 3 && (hi < 0x800 || (hi >= 0xd800 && hi <= 0xdfff)))
                                return 0;
                        if (len == 4 && (hi < 0x10000 || hi > 0x10ffff))
                                return 0;
                }
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        if (ret_cp)
                *ret_cp = cp;
        return len;
}

size_t sbx_utf8_whole(const void *s, size_t n, uint32_t *ret_cp)
{
        int l = n > 0 ? sbx_utf8_decode(s, n, ret_cp) : -1;

        return l > 0 ? (size_t)l : 0;
}

size_t sbx_utf8_cut(const char *s, size_t n)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = n, back = 0;

        /* Walk back over at most 3 continuation bytes to the lead byte of the last sequence;
         * if that sequence is incomplete, cut before it. Invalid bytes are kept: they are shown
         * escaped anyway, and dropping them would hide output. */
        while (i > 0 && back < 3 && (u[i - 1] & 0xc0) == 0x80) {
                i--;
                back++;
        }
        if (i == 0)
                return n;
        {
                unsigned char c = u[i - 1];
                size_t need = c >= 0xf0 && c <= 0xf4   ? 4
                              : c >= 0xe0 && c <= 0xef ? 3
                              : c >= 0xc2 && c <= 0xdf ? 2
                                                       : 0;
                if (need > 1 && back + 1 < need)
                        return i - 1;
        }
        return n;
}

/* Code points a terminal shows as nothing, or that move or break the text around them: C1
 * controls; bidi marks, overrides and isolates (U+061C, U+200E/F, U+202A-202E, U+2066-2069);
 * zero-width space, word joiner and invisible operators (U+200B, U+2060-2064); line and
 * paragraph separators (U+2028/9); the soft hyphen (U+00AD), Mongolian vowel separator
 * (U+180E) and BOM (U+FEFF) (issue 24). Zero-width (non-)joiners U+200C/D stay: scripts and
 * emoji need them, and they hide nothing on their own. */
static bool term_hidden(uint32_t cp)
{
        return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad || cp == 0x061c || cp == 0x180e ||
               cp == 0x200b || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
               (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

char *sbx_term_escape(const char *s, size_t n, bool keep_newline)
{
        static const char hex[] = "0123456789abcdef";
        char *out = xmalloc(n * 6 + 1); /* the worst case: \uXXXX for each 3-byte sequence */
        size_t i = 0, o = 0;

        while (s && i < n) {
                unsigned char ch = (unsigned char)s[i];
                uint32_t cp = 0;
                int l = sbx_utf8_decode(s + i, n - i, &cp);

                if (keep_newline && ch == '\n') {
                        out[o++] = '\n';
                        i++;
                        continue;
                }
                if (l <= 0 || cp < 0x20 || cp == 0x7f) {
                        out[o++] = '\\';
                        out[o++] = 'x';
                        out[o++] = hex[ch >> 4];
                        out[o++] = hex[ch & 15];
                        i++;
                        continue;
                }
                if (term_hidden(cp))
                        o += (size_t)sprintf(out + o, "\\u%04x", (unsigned)cp);
                else {
                        memcpy(out + o, s + i, (size_t)l);
                        o += (size_t)l;
                }
                i += (size_t)l;
        }
        out[o] = '\0';
        return out;
}
