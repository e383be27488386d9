/* log.h - one line per event on stderr with a level prefix. stdout belongs to the MCP
 * framing (src/mcp) and nothing here ever touches it. Thread-safe. */
#pragma once

enum sbx_log_level {
        SBX_LOG_ERROR = 0,
        SBX_LOG_WARNING = 1,
        SBX_LOG_INFO = 2,
        SBX_LOG_DEBUG = 3,
};

/** sbx_log_set_level() - messages above @level are dropped. Default SBX_LOG_INFO. */
void sbx_log_set_level(enum sbx_log_level level);
enum sbx_log_level sbx_log_get_level(void);

/** sbx_log() - write "vestibule[pid]: <level>: <message>\n" to stderr in one write(2). */
void sbx_log(enum sbx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) sbx_log(SBX_LOG_ERROR, __VA_ARGS__)
#define log_warning(...) sbx_log(SBX_LOG_WARNING, __VA_ARGS__)
#define log_info(...) sbx_log(SBX_LOG_INFO, __VA_ARGS__)
#define log_debug(...) sbx_log(SBX_LOG_DEBUG, __VA_ARGS__)
