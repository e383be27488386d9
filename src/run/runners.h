/* runners.h - the session runners: small programs the server hands into a session's sandbox
 * as its program (src/run/runners/: python.py, node.js, bash.sh), which then run the cells
 * they are fed. The framing they speak is described in docs/design/sessions.md. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "run/run.h"

/* The fds a runner reads cells from and writes one status record per cell to. */
#define SBX_RUNNER_CELL_FD 4
#define SBX_RUNNER_STATUS_FD 5

/**
 * sbx_runner_source() - the runner of @l, as it is written to /sandbox/<script> (the file
 * sbx_language_script() names): static bytes, *@ret_len of them.
 */
const char *sbx_runner_source(enum sbx_language l, size_t *ret_len);

/**
 * sbx_runner_argv() - the command line that runs the runner of @l inside the sandbox
 * ("python3 /sandbox/main.py"; node adds --expose-internals for its REPL's rewriting of
 * top-level await): a static NULL-terminated array.
 */
const char *const *sbx_runner_argv(enum sbx_language l);

/* One status record of a runner: "<seq> <kind> <code>\n". */
struct sbx_runner_status {
        long long seq; /* the cell it ends; 0 for "ready" */
        char kind[16]; /* "ready", "ok", "error", "exit", "interrupted" */
        int code;      /* ok/exit: the cell's status; error 1; interrupted 130 */
};

/**
 * sbx_runner_status_parse() - parse one record @line (@len bytes, without the newline).
 * Return: 0, or -EBADMSG when it is not a record.
 */
int sbx_runner_status_parse(const char *line, size_t len, struct sbx_runner_status *ret);

/**
 * sbx_runner_send_cell() - hand one cell to a runner: the header "<seq> <len>\n", then the
 * @len bytes of @code, written whole into @fd (the runner's cell pipe or FIFO, made
 * non-blocking here), waiting for room at most until @until_ms (sbx_now_ms() clock).
 * The framing: docs/design/sessions.md. Return: 0, -ETIMEDOUT when the runner did not take
 * it in time, or another -errno of write(2) (-EPIPE: the runner is gone; SIGPIPE must be
 * ignored or blocked by the caller).
 */
int sbx_runner_send_cell(int fd, long long seq, const char *code, size_t len, uint64_t until_ms);

/**
 * sbx_runner_check_cell() - what no session of @l can take, said before anything is sent:
 * network "allowlist" (a session's sandbox has no network), and a NUL byte in bash code (the
 * shell cannot hold it). @req: borrowed.
 * Return: 0, or -EINVAL with @err holding the Blocked: text that names the fix.
 */
int sbx_runner_check_cell(const struct run_request *req, enum sbx_language l,
                          struct sbx_error *err);

/* The status records a runner has written and the server has not yet taken: bytes read from
 * the status fd, at most one record's worth beyond what was taken. */
struct sbx_runner_records {
        char buf[128];
        size_t len;
};

/**
 * sbx_runner_take_record() - the next whole record of @rs (untrusted bytes from the sandbox):
 * parsed into @ret and removed from @rs.
 * Return: 1 with @ret filled; 0 when no whole record is there yet (read more into
 * @rs->buf + @rs->len, at most sizeof(@rs->buf) - @rs->len bytes); -EBADMSG for a record that
 * does not parse (it is dropped) or for a buffer full without a newline (nothing more fits:
 * the session must end).
 */
int sbx_runner_take_record(struct sbx_runner_records *rs, struct sbx_runner_status *ret);

/**
 * sbx_runner_channel_broken() - after a cell's status channel was readable, a backend's
 * collect read @r (0, or its read_record()'s -errno: -EBADMSG a line that is not a record,
 * -ETIMEDOUT none of this cell's sequence number) there: anything but 0 and -EPIPE (the runner
 * gone) means something other than the runner wrote to the channel (code in the session can
 * reach it, docs/design/sessions.md). The backend has then ended the session; this says so in
 * @res: the cell killed (SIGKILL, as the session was) and res->session_ended naming the cause,
 * in place of "the interpreter exited" with a made-up exit status. Return: true when it was so.
 */
bool sbx_runner_channel_broken(int r, struct run_result *res);

/**
 * sbx_runner_drop_startup() - read and drop what the interpreter printed on @fd (a session's
 * stdout or stderr pipe, blocking or not) before its "ready" record: output of its start-up (a
 * .pth file or sitecustomize.py in the workspace's user site, docs/design/sessions.md), which
 * is no cell's. The runners flush both streams before the record, so it is all in the pipe by
 * then. Reads what is there now (poll(2) with no wait), at most 1 MiB. Return: bytes dropped.
 */
size_t sbx_runner_drop_startup(int fd);
