/* content.h - the MCP content items beyond a result's text: images as image content, other
 * binary files as an embedded resource, and the files a run changed as structuredContent.
 * MCP schema: ImageContent {type "image", data (base64), mimeType} and EmbeddedResource
 * {type "resource", resource {uri, mimeType, blob (base64)}}, both in every revision since
 * 2024-11-05 (https://modelcontextprotocol.io/specification, "Tool result"). */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

#include "run/run.h"

/**
 * tools_base64() - RFC 4648 base64 of @len bytes (libcrypto's EVP_EncodeBlock, loaded on
 * first use).
 * Return: a new NUL-terminated string (caller frees), or NULL when libcrypto cannot be loaded
 * (then @err names the package).
 */
char *tools_base64(const unsigned char *data, size_t len, struct sbx_error *err);

/**
 * tools_image_content() - a new ImageContent object for @len bytes of @mime, or NULL when
 * base64 is not available (@err says why). Caller puts it.
 */
json_object *tools_image_content(const char *mime, const unsigned char *data, size_t len,
                                 struct sbx_error *err);

/**
 * tools_blob_content() - a new EmbeddedResource object {uri "file:///workspace/<rel>",
 * mimeType "application/octet-stream", blob}, or NULL (@err says why). The uri's path is
 * percent-encoded (RFC 3986 unreserved and '/' kept). Caller puts it.
 */
json_object *tools_blob_content(const char *rel, const unsigned char *data, size_t len,
                                struct sbx_error *err);

/**
 * tools_files_json() - structuredContent's "files": a new array of {path, bytes, change
 * ("new"|"changed"), image (mime, only for images), attached (images only), not_attached
 * (why, images not attached only)} for @r's listed files. Paths are escaped as the text's
 * "files:" line escapes them (sbx_text_sanitize_line: valid UTF-8, every control byte, '\t'
 * and '\n' included, as \xNN text). Caller puts it.
 */
json_object *tools_files_json(const struct run_result *r);

/**
 * tools_image_items() - a new array of ImageContent objects for @r's attached images (empty
 * when there are none). When base64 is unavailable the images are left out and *@ret_note
 * gets a static reason. Caller puts it.
 */
json_object *tools_image_items(const struct run_result *r, const char **ret_note);

/**
 * tools_files_schema() - add the JSON Schema of "files", "files_more", "files_note" and
 * "images_attached" to @props, run_code's outputSchema properties (no type arrays: every
 * field has one type, and an absent field means "not applicable").
 */
void tools_files_schema(json_object *props);
