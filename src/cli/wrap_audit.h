/* wrap_audit.h - the audit records of the tools/call requests `vestibule-mcp mcp wrap` relays:
 * a start record per request (the wrapped server's name, the tool and its arguments) before it
 * reaches the server, and an end record when the server's response with the same JSON-RPC id
 * passes back ("ok", "tool error" for a result with isError, "error" for a JSON-RPC error).
 * The same log as run_code (src/audit/audit.h audit_host_start()/audit_host_end()), read by
 * `vestibule-mcp audit`. Thread-safe: the two relay threads call in. MCP spec 2025-06-18,
 * "Tools" (tools/call, isError). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

struct wrap_audit;

/**
 * wrap_audit_open() - the audit log of the settings (VESTIBULE_AUDIT_DIR) for the server @name,
 * whose end records carry the run's isolation @grade (both borrowed; must outlive the result).
 * Never NULL: a log that cannot be opened is said on stderr once and each request is still logged
 * on stderr. Lives until the process exits (the relay threads use it to their end; there is no
 * free); its records are each written when made (audit_host_start(), src/audit/audit.h).
 */
struct wrap_audit *wrap_audit_open(const char *name, const char *grade);

/**
 * wrap_audit_request() - @line (@len bytes, one JSON-RPC message from the client): for each
 * tools/call request in it (one, or a batch's), one stderr line and its start record (waits for
 * the disk, <= 2 s). A line it cannot read as the server will (wrap_json_read(), strict) is
 * not relayed either: @ret_refusal gets a -32700 error naming why (id null when unread); nor is
 * one with a key that is a JSON-RPC or MCP name but for its case ("Method": Go's encoding/json
 * folds case), answered -32600.
 * Fail closed: a tools/call whose start record could not be written (no log, a write that
 * failed; a record the disk has only not confirmed within 2 s is queued and counts as written)
 * must not reach the server.
 * @ret_refusal: NULL when @line may be relayed; else a new JSON-RPC error response line (ending
 * in a newline, the request's id, code -32603, a message naming the fix; for a batch, an array
 * of them, one per request in it with an id, as none of it is relayed) to send to the client
 * in its place, or "" when nothing in it has an id (nothing to answer); free() it.
 */
void wrap_audit_request(struct wrap_audit *a, const char *line, size_t len, char **ret_refusal);

/**
 * wrap_json_read() - @line (@len bytes, not NUL-terminated; one message of the relay) parsed
 * with json-c, nested at most 512 deep (json-c's default is 32). With @strict, read as the
 * server will (RFC 8259; JSON-RPC over MCP's stdio transport, one message a line): json-c's
 * strict mode, nothing but blanks after the value, no CR but one before the final LF (Python's
 * text reader ends a line at a CR), and no \u0000 escape (json-c cuts a key at its NUL, so
 * "name\u0000" would read as a second "name", where JavaScript and Python see another key).
 * Return: the value (a new reference; json_object_put() it) or NULL. When @ret_why is not NULL it
 * gets NULL (read) or why the line must not be relayed (a static string), and the value is returned
 * even then when one was parsed; when it is NULL, a line with a reason gives NULL. Source: json-c's
 * json_tokener.h (json_tokener_new_ex(), JSON_TOKENER_STRICT, which also fails on anything but
 * blanks after the value).
 */
json_object *wrap_json_read(const char *line, size_t len, bool strict, const char **ret_why);

/** wrap_audit_response() - @line from the server: when it answers a recorded request, that
 * request's end record. */
void wrap_audit_response(struct wrap_audit *a, const char *line, size_t len);
