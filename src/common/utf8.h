/* utf8.h - strict UTF-8 decoding shared by the modules that must tell text from bytes (the
 * audit log, read_workspace): no overlong forms, no surrogates, nothing above U+10FFFF. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * sbx_utf8_decode() - decode the sequence at the start of @s.
 * @n:      bytes available at @s (> 0).
 * @ret_cp: on success the code point; may be NULL.
 * Return: its length 1..4; 0 when the bytes are not valid UTF-8; -1 when they are a valid
 * beginning that @n cuts short (more bytes could complete it).
 */
int sbx_utf8_decode(const void *s, size_t n, uint32_t *ret_cp);

/**
 * sbx_utf8_whole() - sbx_utf8_decode() for a caller that has all the bytes: a sequence @n
 * cuts short counts as invalid.
 * @n:      bytes available at @s (0 gives 0).
 * @ret_cp: on success the code point; may be NULL.
 * Return: the length 1..4 of the valid sequence at @s, or 0 (RFC 3629: no overlong form, no
 * surrogate, nothing above U+10FFFF, no sequence cut short).
 */
size_t sbx_utf8_whole(const void *s, size_t n, uint32_t *ret_cp);

/**
 * sbx_utf8_cut() - where to cut the first @n bytes of @s so that no UTF-8 sequence is split:
 * @n, or less when the last sequence is incomplete (at most 3 bytes less). Invalid bytes are
 * kept (a caller shows them escaped).
 */
size_t sbx_utf8_cut(const char *s, size_t n);

/**
 * sbx_term_escape() - @s (@n bytes) made safe to print on a terminal, as `vestibule-mcp audit`
 * prints recorded strings: tab, newline and every other C0 byte, DEL and each byte of invalid
 * UTF-8 as \xNN; C1 controls, bidirectional overrides/isolates/marks (U+202A-202E,
 * U+2066-2069, U+200E/F, U+061C) and the invisible or line-breaking characters (U+00AD,
 * U+180E, U+200B, U+2028/9, U+2060-2064, U+FEFF) as \uXXXX; everything else as it is
 * (Unicode TR #9 and the General Category Cf, https://www.unicode.org/reports/tr9/). With
 * @keep_newline a '\n' stays a line break (for a multi-line block such as a sandbox's stderr).
 * Return: a new NUL-terminated string (free()); never NULL (out of memory aborts). NULL @s
 * gives "".
 */
char *sbx_term_escape(const char *s, size_t n, bool keep_newline);
