/* lazy/yaml.h - libyaml (libyaml-0.so.2, Debian package libyaml-0-2), loaded on first use.
 *
 * Include this instead of <yaml.h>. Only a config file needs it: a server configured through
 * the environment alone (the common case for an MCP server) never maps it. config.c calls
 * lazy_yaml_load() before parsing a file; when libyaml is missing the file is reported as
 * unreadable with "libyaml-0-2 is not installed ...: apt-get install libyaml-0-2", through
 * the config-invalid path (Blocked: on every call), as any other unreadable config file. See
 * lazy/lazy.h. */
#pragma once

#include <yaml.h>

#include "common/error.h"

/* Every libyaml-0 function the code calls; add a name here when a new one is needed. */
#define LAZY_YAML_SYMBOLS(X)                                                                       \
        X(yaml_document_delete)                                                                    \
        X(yaml_document_get_node)                                                                  \
        X(yaml_document_get_root_node)                                                             \
        X(yaml_parser_delete)                                                                      \
        X(yaml_parser_initialize)                                                                  \
        X(yaml_parser_load)                                                                        \
        X(yaml_parser_set_input_string)

struct lazy_yaml_table {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator cannot be parenthesised */
#define LAZY_FIELD_(name) __typeof__(&name) name;
        LAZY_YAML_SYMBOLS(LAZY_FIELD_)
#undef LAZY_FIELD_
};

/**
 * lazy_yaml_load() - load libyaml-0.so.2 and resolve every name above, once per process.
 * Thread-safe; cheap after the first call.
 * Return: 0, or -ENOENT (libyaml-0-2 not installed) / -ENOSYS (a build without one of the
 * functions), with @err naming the package to install.
 */
int lazy_yaml_load(struct sbx_error *err);

/** lazy_yaml() - the resolved table; loads first, aborts if that fails (see lazy.h). */
const struct lazy_yaml_table *lazy_yaml(void);

#ifndef LAZY_YAML_IMPL
#define yaml_document_delete (lazy_yaml()->yaml_document_delete)
#define yaml_document_get_node (lazy_yaml()->yaml_document_get_node)
#define yaml_document_get_root_node (lazy_yaml()->yaml_document_get_root_node)
#define yaml_parser_delete (lazy_yaml()->yaml_parser_delete)
#define yaml_parser_initialize (lazy_yaml()->yaml_parser_initialize)
#define yaml_parser_load (lazy_yaml()->yaml_parser_load)
#define yaml_parser_set_input_string (lazy_yaml()->yaml_parser_set_input_string)
#endif
