/* utf8.h - strict UTF-8 decoding shared by the modules that must tell text from bytes (the
 * audit log, read_workspace): no overlong forms, no surrogates, nothing above U+10FFFF. */
#pragma once

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
