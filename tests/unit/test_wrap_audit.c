/* test_wrap_audit.c - the reader in front of `mcp wrap`'s audit (src/cli/wrap_audit.c): every
 * tools/call the client sends is read as the server will read it, recorded before it is
 * relayed, and a line the wrap cannot read that way is answered, not relayed. The real wrapped
 * server (the SDK's, through the real binary) is tests/run-cmd/mcp-wrap.test.sh "2c"; here the
 * forms that server cannot show: a batch (MCP 2025-03-26; the SDK 1.32 server refuses one),
 * nesting past 512, a second value on the line, and the controls (an escaped backslash before
 * "u0000", blank lines, other methods). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/wrap_audit.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
        dir = sbx_test_tmpdir();
}

static void teardown(void)
{
        sbx_test_tmpdir_remove(&dir);
        unsetenv("VESTIBULE_AUDIT_DIR");
}

/* A wrap audit whose log is in @sub of the test folder (a path under a regular file: none). */
static struct wrap_audit *open_in(const char *sub)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, sub);

        ck_assert_int_eq(setenv("VESTIBULE_AUDIT_DIR", path, 1), 0);
        return wrap_audit_open("t", "native");
}

/* The log's files hold @needle. */
static bool logged(const char *needle)
{
        _cleanup_free_ char *path = xasprintf("%s/audit", dir);
        DIR *d = opendir(path);
        struct dirent *e;
        bool found = false;

        if (!d)
                return false;
        while (!found && (e = readdir(d))) {
                _cleanup_free_ char *f = xasprintf("%s/%s", path, e->d_name), *text = NULL;
                size_t len = 0;
                FILE *fp;

                if (e->d_name[0] == '.' || !(fp = fopen(f, "r")))
                        continue;
                found = getdelim(&text, &len, '\0', fp) > 0 && strstr(text, needle);
                fclose(fp);
        }
        closedir(d);
        return found;
}

/* Send @line; return the refusal (NULL: relayed). */
static char *request(struct wrap_audit *a, const char *line)
{
        char *refusal = NULL;

        wrap_audit_request(a, line, strlen(line), &refusal);
        return refusal;
}

/* @refusal is one error response (or, @n > 0, an array of @n) with @code and the ids @ids
 * ("null" for none). */
static void check_refusal(const char *refusal, int code, size_t n, const char *const *ids)
{
        json_object *o, *id, *e, *c;

        ck_assert_ptr_nonnull(refusal);
        ck_assert_msg(refusal[0] && refusal[strlen(refusal) - 1] == '\n', "'%s'", refusal);
        o = json_tokener_parse(refusal);
        ck_assert_ptr_nonnull(o);
        for (size_t i = 0; i < (n ? n : 1); i++) {
                json_object *r = n ? json_object_array_get_idx(o, i) : o;

                if (n)
                        ck_assert_uint_eq(json_object_array_length(o), n);
                ck_assert(json_object_object_get_ex(r, "id", &id));
                ck_assert_str_eq(json_object_to_json_string(id), ids[i]);
                ck_assert(json_object_object_get_ex(r, "error", &e));
                ck_assert(json_object_object_get_ex(e, "code", &c));
                ck_assert_int_eq(json_object_get_int(c), code);
        }
        json_object_put(o);
}

#define CALL(id, marker)                                                                           \
        "{\"jsonrpc\":\"2.0\",\"id\":" #id ",\"method\":\"tools/call\",\"params\":{\"name\":"      \
        "\"x\",\"arguments\":{\"m\":\"" marker "\"}}}"

START_TEST(escaped_and_batched_calls_are_recorded)
{
        struct wrap_audit *a = open_in("audit");
        char *r;

        /* the method written with escapes, as json-c and PHP write '/' */
        ck_assert_ptr_null(
            request(a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools\\/call\","
                       "\"params\":{\"name\":\"x\",\"arguments\":{\"m\":\"esc-1\"}}}\n"));
        ck_assert(logged("esc-1"));
        /* a batch: both calls recorded, the ping beside them relayed with them */
        ck_assert_ptr_null(
            request(a, "[" CALL(2, "bat-2") ",{\"jsonrpc\":\"2.0\",\"id\":3,"
                                            "\"method\":\"ping\"}," CALL(4, "bat-4") "]\n"));
        ck_assert(logged("bat-2") && logged("bat-4"));
        /* nested 100 deep: past json-c's default 32, read */
        {
                _cleanup_free_ char *deep = NULL;
                size_t len = 0;
                FILE *b = open_memstream(&deep, &len);

                fputs("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"x\",\"arguments\":{\"m\":\"deep-5\",\"d\":",
                      b);
                for (int i = 0; i < 100; i++)
                        fputc('[', b);
                for (int i = 0; i < 100; i++)
                        fputc(']', b);
                fputs("}}}", b);
                fclose(b);
                ck_assert_ptr_null(request(a, deep));
                ck_assert(logged("deep-5"));
        }
        /* controls: an escaped backslash before u0000 is no NUL; blank lines and other methods
         * are relayed unrecorded */
        ck_assert_ptr_null(request(a, CALL(6, "bs-\\\\u0000-6")));
        ck_assert(logged("bs-"));
        ck_assert_ptr_null(request(a, "\r\n"));
        ck_assert_ptr_null(request(a, CALL(12, "crlf-12") "\r\n"));
        ck_assert(logged("crlf-12"));
        ck_assert_ptr_null(request(a, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}"));
        ck_assert(!logged("tools/list"));
        r = request(a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        ck_assert_ptr_null(r);
}
END_TEST

START_TEST(unreadable_lines_are_answered_not_relayed)
{
        struct wrap_audit *a = open_in("audit");
        static const char *const null_id[] = {"null"}, *const id9[] = {"9"};
        _cleanup_free_ char *deep = NULL;
        size_t len = 0;
        FILE *b = open_memstream(&deep, &len);
        char *r;

        /* not JSON: answered with id null, as the server would */
        r = request(a, "tools/call please\n");
        check_refusal(r, -32700, 0, null_id);
        free(r);
        /* a raw NUL byte inside */
        r = malloc(8);
        memcpy(r, "{\"a\":\0}", 8);
        {
                char *refusal = NULL;

                wrap_audit_request(a, r, 7, &refusal);
                check_refusal(refusal, -32700, 0, null_id);
                free(refusal);
        }
        free(r);
        /* a second value on the line: a reader taking values one by one would run the call */
        r = request(a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"} " CALL(10, "two-10"));
        check_refusal(r, -32700, 0, null_id); /* json-c's strict mode reads none of it */
        ck_assert(!logged("two-10"));
        free(r);
        /* a \u0000 escape, which json-c takes apart from the server's reader */
        r = request(a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"x\",\"name\\u0000\":\"y\"}}");
        check_refusal(r, -32700, 0, id9);
        ck_assert_msg(strstr(r, "u0000"), "%s", r);
        free(r);
        /* nested past 512 */
        for (int i = 0; i < 600; i++)
                fputc('[', b);
        for (int i = 0; i < 600; i++)
                fputc(']', b);
        fclose(b);
        r = request(a, deep);
        check_refusal(r, -32700, 0, null_id);
        ck_assert_msg(strstr(r, "512"), "%s", r);
        free(r);
        /* a CR inside the line: Python's reader ends a line there, and reads the call after it */
        r = request(a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"x\":\r" CALL(
                           11, "cr-11") "\r}\n");
        ck_assert_str_eq(r, ""); /* refused; a notification: nothing to answer */
        ck_assert(!logged("cr-11"));
        free(r);
        /* a key that is a JSON-RPC or MCP name but for its case (Go's reader folds case) */
        r = request(a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"Method\":"
                       "\"tools/call\",\"params\":{}}");
        check_refusal(r, -32600, 0, id9);
        free(r);
        r = request(a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"x\",\"NAME\":\"y\"}}");
        check_refusal(r, -32600, 0, id9);
        free(r);
        /* not standard JSON (json-c alone takes single quotes) */
        r = request(a, "{'jsonrpc':'2.0','id':9,'method':'tools/call'}");
        check_refusal(r, -32700, 0, null_id);
        free(r);
}
END_TEST

START_TEST(batch_with_an_unrecordable_call_is_refused_whole)
{
        /* a log that cannot be opened: a path under a regular file */
        _cleanup_free_ char *file = xasprintf("%s/file", dir);
        FILE *f = fopen(file, "w");
        static const char *const ids[] = {"1", "\"b\""};
        struct wrap_audit *a;
        char *r;

        ck_assert_ptr_nonnull(f);
        fclose(f);
        a = open_in("file/audit");
        r = request(a, "[{\"jsonrpc\":\"2.0\",\"id\":\"b0\",\"method\":\"notifications/x\"}]");
        ck_assert_ptr_null(r); /* control: no call, relayed */
        r = request(
            a, "[" CALL(1, "m") ",{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"},"
                                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]");
        check_refusal(r, -32603, 2, ids);
        ck_assert_msg(strstr(r, "VESTIBULE_AUDIT_DIR"), "%s", r);
        free(r);
        /* one call with no id: nothing to answer, and not relayed */
        r = request(a,
                    "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
        ck_assert_str_eq(r, "");
        free(r);
}
END_TEST

static Suite *wrap_audit_suite(void)
{
        Suite *s = suite_create("wrap_audit");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, escaped_and_batched_calls_are_recorded);
        tcase_add_test(tc, unreadable_lines_are_answered_not_relayed);
        tcase_add_test(tc, batch_with_an_unrecordable_call_is_refused_whole);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(wrap_audit_suite());
}
