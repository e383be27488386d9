/* backend.c - what every backend shares: freeing one. */
#include "run/backend.h"

#include <stdlib.h>

struct backend *backend_free(struct backend *b)
{
        if (!b)
                return NULL;
        if (b->ops && b->ops->shutdown)
                b->ops->shutdown(b);
        if (b->ops && b->ops->destroy)
                b->ops->destroy(b);
        free(b);
        return NULL;
}
