/* jsontext.c - checks on raw JSON text. See jsontext.h. */
#include "common/jsontext.h"

bool sbx_json_has_nul_escape(const char *p, size_t len)
{
        for (size_t i = 0; i + 1 < len; i++) {
                if (p[i] != '\\')
                        continue;
                if (p[i + 1] == 'u' && i + 5 < len && p[i + 2] == '0' && p[i + 3] == '0' &&
                    p[i + 4] == '0' && p[i + 5] == '0')
                        return true;
                i++; /* the escaped character: "\\" is one backslash, not the start of one */
        }
        return false;
}
