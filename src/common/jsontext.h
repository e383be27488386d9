/* jsontext.h - checks on raw JSON text before json-c reads it, where json-c's reading differs
 * from the reader the text is meant for (a JavaScript or Python program). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/**
 * sbx_json_has_nul_escape() - @p (@len bytes, need not be NUL-terminated) holds a \u0000
 * escape: a backslash, itself not escaped, followed by "u0000". Strings are not told apart from
 * the rest (a comment, in the JSON dialects that allow them, is scanned as well), so the answer
 * errs towards yes. Why it matters: json-c keeps object keys as C strings, so it cuts
 * "hooks\u0000" to "hooks", a duplicate that replaces the real one in its view, where
 * JavaScript's JSON.parse and Python's json see another key. Source: RFC 8259 section 7
 * (escapes); json-c's json_object_object_add() (keys are C strings).
 */
bool sbx_json_has_nul_escape(const char *p, size_t len);
