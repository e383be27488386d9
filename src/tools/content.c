/* content.c - image, blob and file-list content for tool results. See content.h. */
#include "tools/content.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "lazy/crypto.h"

char *tools_base64(const unsigned char *data, size_t len, struct sbx_error *err)
{
        char *out;
        int n;

        if (len > (size_t)(INT32_MAX / 4 * 3 - 3)) {
                sbx_fail(err, EFBIG, "%zu bytes are too many to encode", len);
                return NULL;
        }
        if (lazy_crypto_load(err) < 0)
                return NULL;
        out = xmalloc(4 * ((len + 2) / 3) + 1);
        n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        out[n < 0 ? 0 : n] = '\0';
        return out;
}

json_object *tools_image_content(const char *mime, const unsigned char *data, size_t len,
                                 struct sbx_error *err)
{
        _cleanup_free_ char *b64 = tools_base64(data, len, err);
        json_object *o;

        if (!b64)
                return NULL;
        o = json_object_new_object();
        json_object_object_add(o, "type", json_object_new_string("image"));
        json_object_object_add(o, "data", json_object_new_string(b64));
        json_object_object_add(o, "mimeType", json_object_new_string(mime));
        return o;
}

/* file:///workspace/<rel> with everything but RFC 3986 unreserved characters and '/'
 * percent-encoded. */
static char *file_uri(const char *rel)
{
        static const char prefix[] = "file:///workspace/";
        size_t n = strlen(rel);
        char *u = xmalloc(sizeof(prefix) + 3 * n), *p;

        memcpy(u, prefix, sizeof(prefix) - 1);
        p = u + sizeof(prefix) - 1;
        for (const unsigned char *s = (const unsigned char *)rel; *s; s++) {
                if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                    (*s >= '0' && *s <= '9') || strchr("-._~/", *s))
                        *p++ = (char)*s;
                else
                        p += sprintf(p, "%%%02X", *s);
        }
        *p = '\0';
        return u;
}

json_object *tools_blob_content(const char *rel, const unsigned char *data, size_t len,
                                struct sbx_error *err)
{
        _cleanup_free_ char *b64 = tools_base64(data, len, err);
        _cleanup_free_ char *uri = NULL;
        json_object *o, *res;

        if (!b64)
                return NULL;
        uri = file_uri(rel);
        res = json_object_new_object();
        json_object_object_add(res, "uri", json_object_new_string(uri));
        json_object_object_add(res, "mimeType", json_object_new_string("application/octet-stream"));
        json_object_object_add(res, "blob", json_object_new_string(b64));
        o = json_object_new_object();
        json_object_object_add(o, "type", json_object_new_string("resource"));
        json_object_object_add(o, "resource", res);
        return o;
}

json_object *tools_files_json(const struct run_result *r)
{
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < r->n_files; i++) {
                const struct run_file *f = &r->files[i];
                _cleanup_free_ char *p = sbx_text_sanitize_line(f->path, strlen(f->path));
                json_object *o = json_object_new_object();

                json_object_object_add(o, "path", json_object_new_string(p));
                json_object_object_add(o, "bytes", json_object_new_int64((int64_t)f->bytes));
                json_object_object_add(o, "change",
                                       json_object_new_string(f->created ? "new" : "changed"));
                if (f->mime) {
                        json_object_object_add(o, "image", json_object_new_string(f->mime));
                        json_object_object_add(o, "attached", json_object_new_boolean(f->attached));
                        if (!f->attached && f->not_why)
                                json_object_object_add(o, "not_attached",
                                                       json_object_new_string(f->not_why));
                }
                json_object_array_add(a, o);
        }
        return a;
}

json_object *tools_image_items(const struct run_result *r, const char **ret_note)
{
        json_object *a = json_object_new_array();

        *ret_note = NULL;
        for (size_t i = 0; i < r->n_images; i++) {
                struct sbx_error err = {0};
                json_object *img = tools_image_content(r->images[i].mime, r->images[i].data,
                                                       r->images[i].len, &err);

                if (!img) {
                        *ret_note = "images not attached: libcrypto (libssl3) is needed for "
                                    "base64; install it";
                        break;
                }
                json_object_array_add(a, img);
        }
        return a;
}

static json_object *typed(const char *type, const char *desc)
{
        json_object *o = json_object_new_object();

        json_object_object_add(o, "type", json_object_new_string(type));
        if (desc)
                json_object_object_add(o, "description", json_object_new_string(desc));
        return o;
}

void tools_files_schema(json_object *props)
{
        json_object *item = typed("object", NULL), *ip = json_object_new_object();
        json_object *files = typed("array", "Regular files this run created or changed in "
                                            "/workspace, in path order (at most 50).");
        json_object *change = typed("string", NULL), *req = json_object_new_array();

        json_object_object_add(ip, "path", typed("string", "Relative to /workspace."));
        json_object_object_add(ip, "bytes", typed("integer", NULL));
        json_object_array_add(req, json_object_new_string("new"));
        json_object_array_add(req, json_object_new_string("changed"));
        json_object_object_add(change, "enum", req);
        json_object_object_add(ip, "change", change);
        json_object_object_add(ip, "image",
                               typed("string", "The image type told from its bytes, for "
                                               "images only."));
        json_object_object_add(ip, "attached",
                               typed("boolean", "Images only: returned as image content."));
        json_object_object_add(ip, "not_attached",
                               typed("string", "Images only: why it was not returned."));
        json_object_object_add(item, "properties", ip);
        req = json_object_new_array();
        json_object_array_add(req, json_object_new_string("path"));
        json_object_array_add(req, json_object_new_string("bytes"));
        json_object_array_add(req, json_object_new_string("change"));
        json_object_object_add(item, "required", req);
        json_object_object_add(files, "items", item);
        json_object_object_add(props, "files", files);
        json_object_object_add(props, "files_more",
                               typed("integer", "Changed files beyond the listed ones."));
        json_object_object_add(props, "files_note",
                               typed("string", "Why the list may be incomplete."));
        json_object_object_add(props, "images_attached",
                               typed("integer", "How many images follow as image content."));
}
