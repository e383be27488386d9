/* lazy/yaml.c - libyaml-0.so.2's table (see lazy/yaml.h). */
#define LAZY_YAML_IMPL
#include "lazy/yaml.h"

#include "lazy/lazy.h"

static struct lazy_yaml_table table;
static struct lazy_state state =
    LAZY_STATE_INIT("libyaml-0.so.2", "libyaml-0-2", "reading a config file");

static void load_once(void)
{
        void *h = lazy_open(&state);

        if (!h)
                return;
#define LAZY_RESOLVE_(name) table.name = (__typeof__(table.name))lazy_sym(&state, h, #name);
        LAZY_YAML_SYMBOLS(LAZY_RESOLVE_)
#undef LAZY_RESOLVE_
}

int lazy_yaml_load(struct sbx_error *err)
{
        pthread_once(&state.once, load_once);
        return lazy_result(&state, err);
}

const struct lazy_yaml_table *lazy_yaml(void)
{
        pthread_once(&state.once, load_once);
        lazy_require(&state);
        return &table;
}
