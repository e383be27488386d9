/* mcp-internal.h - what the files of src/mcp share: stdio framing (framing.c), JSON-RPC
 * envelopes and ids (jsonrpc.c), protocol revisions and per-revision shapes (revisions.c), and
 * the serve loop with its options (server.c). Not part of the public interface; the unit tests
 * include it to reach the options and the pure helpers. Spec: docs/design/mcp-protocol.md. */
#pragma once

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "mcp/mcp.h"

/* ---- framing.c: newline-delimited JSON on stdio (transports.mdx §stdio) ---- */

/* A line longer than this is discarded and answered -32700; 64 MiB. */
#define MCP_MAX_LINE_BYTES_DEFAULT ((size_t)64 << 20)

/* Reads @fd into a growable buffer and hands out whole lines. */
struct mcp_reader {
        int fd;
        struct sbx_buf buf; /* owned, no cap of its own; [start, buf.len) not yet handed out */
        size_t start;
        size_t scan; /* [start, scan) holds no '\n' */
        size_t max_line_bytes;
        bool discarding; /* dropping the rest of an over-long line */
        bool eof;
};

enum mcp_read_status {
        MCP_READ_NONE = 0, /* no whole line buffered: read more */
        MCP_READ_LINE,     /* *ret_line (NUL-terminated, '\r' stripped) */
        MCP_READ_TOO_LONG, /* a line over max_line_bytes was dropped */
};

/** mcp_reader_init() - read lines from @fd (borrowed, not closed); @max_line_bytes 0 means
 * MCP_MAX_LINE_BYTES_DEFAULT. The buffer grows only while a line is being read. */
void mcp_reader_init(struct mcp_reader *r, int fd, size_t max_line_bytes);
/** mcp_reader_done() - free the buffer (the fd stays open). */
void mcp_reader_done(struct mcp_reader *r);

/**
 * mcp_reader_fill() - one read(2) from the fd into the buffer (growing it as needed).
 * Return: bytes read (> 0), 0 at EOF (r->eof set) or when the fd is non-blocking and empty,
 * or -errno from read(2).
 */
ssize_t mcp_reader_fill(struct mcp_reader *r);

/**
 * mcp_reader_next() - the next buffered line. @ret_line points into the reader's buffer and
 * stays valid until the next fill; it is NUL-terminated at *@ret_len with '\n' and one '\r'
 * stripped. After EOF a last line without '\n' is still returned. Blank lines are returned
 * too (the caller skips them).
 */
enum mcp_read_status mcp_reader_next(struct mcp_reader *r, char **ret_line, size_t *ret_len);

/* The one writer of out_fd: each frame is written whole, under the mutex, then flushed (we
 * write(2) directly, so nothing is buffered). After EPIPE or another write error nothing more
 * is written, and wake_fd is signalled so the serve loop shuts down. */
struct mcp_writer {
        int fd;
        pthread_mutex_t mu;
        int error;              /* positive errno of the first failed write; under mu */
        bool closed;            /* mcp_serve() returned: drop everything; under mu */
        int wake_fd;            /* eventfd written on failure, or -1 */
        size_t max_frame_bytes; /* 0 = MCP_MAX_FRAME_BYTES_DEFAULT */
};

/* The TS client drops the whole connection on a line over 10 MiB (core-internal/src/shared/
 * stdio.ts), so no frame may be longer (with its '\n'). */
#define MCP_MAX_FRAME_BYTES_DEFAULT ((size_t)10 << 20)

/**
 * mcp_writer_send() - serialise @msg compactly, make it valid UTF-8 (U+FFFD for bad bytes),
 * append '\n' and write it in one locked loop. @msg is borrowed. A frame over max_frame_bytes
 * is never written: a response is replaced by a -32603 error with its id (without the id when
 * the id alone would be too long), anything else is dropped, and both are logged.
 * Return: 0, or -errno (EPIPE: the client is gone) once any write has failed.
 */
int mcp_writer_send(struct mcp_writer *w, json_object *msg);

/**
 * mcp_utf8_sanitize() - if @s[0..@len) is not valid UTF-8, a new copy with every invalid
 * sequence replaced by U+FFFD (length in *@ret_len); NULL when @s is already valid.
 */
char *mcp_utf8_sanitize(const char *s, size_t len, size_t *ret_len);

/* ---- jsonrpc.c: JSON-RPC 2.0 envelopes (<rev>/basic/index.mdx) ---- */

enum {
        MCP_ERR_PARSE = -32700,
        MCP_ERR_INVALID_REQUEST = -32600,
        MCP_ERR_METHOD_NOT_FOUND = -32601,
        MCP_ERR_INVALID_PARAMS = -32602,
        MCP_ERR_INTERNAL = -32603,
        MCP_ERR_UNSUPPORTED_VERSION = -32022, /* 2026-07-28 UnsupportedProtocolVersion */
};

/* A request id: a string or an integer, never null. Compared by JSON type and value. */
enum mcp_id_type { MCP_ID_NONE = 0, MCP_ID_INT, MCP_ID_STRING };
struct mcp_id {
        enum mcp_id_type type;
        int64_t num; /* MCP_ID_INT */
        char *str;   /* MCP_ID_STRING; owned, may hold NULs */
        size_t str_len;
};

/** mcp_id_from_json() - read @v as an id. Return 0, or -EINVAL (null, bool, float, object,
 * array, an integer outside int64). */
int mcp_id_from_json(json_object *v, struct mcp_id *ret);
/** mcp_id_equal() - same JSON type and value: "1" and 1 differ (cancellation.mdx). */
bool mcp_id_equal(const struct mcp_id *a, const struct mcp_id *b);
/** mcp_id_copy() - @dst becomes an independent copy of @src (release with mcp_id_done()). */
void mcp_id_copy(struct mcp_id *dst, const struct mcp_id *src);
/** mcp_id_done() - free what @id holds and reset it to MCP_ID_NONE. */
void mcp_id_done(struct mcp_id *id);
/** mcp_id_to_json() - a new json value for @id, or NULL for MCP_ID_NONE. */
json_object *mcp_id_to_json(const struct mcp_id *id);
/** mcp_log_safe() - @s (NUL-terminated, may be NULL) for a log line, into @buf: at most
 * @size - 1 bytes, control bytes (C0, DEL) replaced by '?', so a client cannot drive the
 * terminal that shows our stderr. Returns @buf. */
const char *mcp_log_safe(const char *s, char *buf, size_t size);
/** mcp_id_describe() - @id for a log line ("7", "\"abc\""), into @buf. */
const char *mcp_id_describe(const struct mcp_id *id, char *buf, size_t size);

/**
 * mcp_json_parse() - parse one line strictly (RFC 8259: no trailing garbage, valid UTF-8, no
 * NaN/Infinity). @line must have a NUL at @len. Depth is capped (nesting beyond it fails).
 * Return: 0 and a new value in *@ret, or -EINVAL with a static reason in *@ret_why.
 */
int mcp_json_parse(const char *line, size_t len, json_object **ret, const char **ret_why);

enum mcp_msg_kind {
        MCP_MSG_REQUEST = 0,
        MCP_MSG_NOTIFICATION,
        MCP_MSG_RESPONSE, /* from the client: we never send requests, so it is ignored */
        MCP_MSG_INVALID,  /* answered -32600 */
};

struct mcp_msg {
        enum mcp_msg_kind kind;
        struct mcp_id id;        /* REQUEST; INVALID when the id itself was readable */
        const char *method;      /* REQUEST/NOTIFICATION; borrowed from the json */
        json_object *params;     /* borrowed; NULL when absent or null */
        const char *invalid_why; /* INVALID: static text */
};

/** mcp_msg_classify() - sort one parsed JSON value into a request, notification, client
 * response or invalid request (not an object, jsonrpc != "2.0", method not a string, bad id,
 * params a scalar). @m borrows from @v; release with mcp_msg_done(). */
void mcp_msg_classify(json_object *v, struct mcp_msg *m);
/** mcp_msg_done() - free what mcp_msg_classify() copied (the id). */
void mcp_msg_done(struct mcp_msg *m);

/** mcp_make_result() - {"jsonrpc":"2.0","id":@id,"result":@result}; takes @result. */
json_object *mcp_make_result(const struct mcp_id *id, json_object *result);
/** mcp_make_error() - an error response; @id NULL/NONE omits "id"; takes @data (may be NULL). */
json_object *mcp_make_error(const struct mcp_id *id, int code, const char *message,
                            json_object *data);
/** mcp_make_notification() - {"jsonrpc":"2.0","method":@method,"params":@params}; takes @params. */
json_object *mcp_make_notification(const char *method, json_object *params);

/* ---- revisions.c: protocol revisions and what each one knows ---- */

enum mcp_rev {
        MCP_REV_2024_11_05 = 0,
        MCP_REV_2025_03_26,
        MCP_REV_2025_06_18,
        MCP_REV_2025_11_25,
        MCP_REV_2026_07_28, /* modern: stateless, decided per request */
};
#define MCP_REV_LATEST_LEGACY MCP_REV_2025_11_25
#define MCP_REV_MODERN MCP_REV_2026_07_28

/** mcp_rev_name() - "2025-06-18" etc. Static string. */
const char *mcp_rev_name(enum mcp_rev rev);

/**
 * mcp_rev_negotiate() - the legacy initialize rule (lifecycle.mdx §Version Negotiation): a
 * supported @requested is echoed; "2024-10-07" (sent by the TS SDK) is echoed and served as
 * 2024-11-05; anything else (unknown, newer, "2026-07-28") gets 2025-11-25.
 * @ret_echo: the protocolVersion to answer with (@requested itself, or a static string).
 * Return: the revision whose rules apply.
 */
enum mcp_rev mcp_rev_negotiate(const char *requested, const char **ret_echo);

/** mcp_rev_is_modern_request() - rule 2 of docs/design/mcp-protocol.md §3: server/discover, or
 * params._meta holding an io.modelcontextprotocol/ request key. */
bool mcp_rev_is_modern_request(const char *method, json_object *params);

/**
 * mcp_rev_check_modern() - validate a modern request's params._meta: protocolVersion (string)
 * and clientCapabilities (object) must be there (-32602), and the version must be 2026-07-28
 * (-32022 with data {supported, requested}).
 * Return: 0 when the request may be served, else a negative JSON-RPC code with a new message in
 * *@ret_msg (caller frees) and new data (or NULL) in *@ret_data.
 */
int mcp_rev_check_modern(json_object *params, char **ret_msg, json_object **ret_data);

/** mcp_rev_server_info() - a new Implementation object as @rev knows it (title 2025-06-18+,
 * description 2025-11-25+). */
json_object *mcp_rev_server_info(enum mcp_rev rev);
/** mcp_rev_capabilities() - a new ServerCapabilities object: tools (listChanged false), logging. */
json_object *mcp_rev_capabilities(enum mcp_rev rev);
/** mcp_rev_supported_versions() - a new array, newest first, of every revision served. */
json_object *mcp_rev_supported_versions(void);

/**
 * mcp_rev_tool() - a new copy of Tool @tool (newest shape) holding only what @rev knows:
 * annotations from 2025-03-26, title/outputSchema/_meta from 2025-06-18, icons/execution and
 * `$schema` from 2025-11-25, execution dropped again in 2026-07-28; a legacy outputSchema
 * without type "object" is dropped (TS clients reject the whole list otherwise).
 */
json_object *mcp_rev_tool(json_object *tool, enum mcp_rev rev);
/** mcp_rev_tools() - mcp_rev_tool() over an array; a new array (empty for NULL). */
json_object *mcp_rev_tools(json_object *tools, enum mcp_rev rev);

/** mcp_rev_finish_result() - for a modern request add resultType "complete" and
 * _meta["io.modelcontextprotocol/serverInfo"] to @result; nothing for legacy. Returns @result. */
json_object *mcp_rev_finish_result(json_object *result, bool modern);

/** mcp_rev_finish_tool_result() - a tools/call result: for a modern request add resultType
 * "complete" only (no _meta); nothing for legacy. Returns @result. */
json_object *mcp_rev_finish_tool_result(json_object *result, bool modern);

/* ---- server.c ---- */

/* Knobs the tests turn; mcp_serve() uses the defaults. */
struct mcp_serve_options {
        size_t max_line_bytes;         /* 0 = MCP_MAX_LINE_BYTES_DEFAULT */
        unsigned progress_interval_ms; /* 0 = 1000: at most one progress notification a second */
        unsigned shutdown_wait_ms;     /* 0 = 10000: how long to wait for workers at exit */
        size_t max_frame_bytes;        /* 0 = MCP_MAX_FRAME_BYTES_DEFAULT */
};

/** mcp_serve_opts() - mcp_serve() with @opts (NULL = defaults). */
int mcp_serve_opts(const struct mcp_handlers *handlers, int in_fd, int out_fd,
                   const struct mcp_serve_options *opts, struct sbx_error *err);
