/* pins.h - images/pins: the pinned registry images and the Debian-built alternatives, read from
 * the installed data directory or the source tree.
 *
 * Lookup order for the images directory (no environment variable is read):
 *   1. <directory of the running executable>/../share/vestibule/images  (an installed build)
 *   2. VESTIBULE_SOURCE_DIR/images, compiled in by CMake             (a build tree)
 * The first that holds a readable `pins` file wins; build.sh is taken from the same place. */
#pragma once

#include "common/error.h"

struct setup_pins {
        char *python_registry; /* python.registry: name@sha256:<64 hex> */
        char *node_registry;   /* node.registry */
        char *python_debian;   /* python.debian: the engine name of the Debian-built image */
        char *node_debian;     /* node.debian */
        char *debian_recipe;   /* debian.recipe: sha256:<64 hex> of images/build.sh */
};

/**
 * setup_pins_parse() - parse pins text: `key=value` lines, the value ending at the first blank,
 * an optional `# comment` after it; '#' lines and blank lines are ignored. Unknown keys are
 * errors (a typo must not silently fall back), as are missing keys, a registry value that is
 * not name@sha256:<64 lowercase hex>, and a recipe that is not sha256:<64 hex>.
 * @ret: filled on success (free with setup_pins_done()); untouched on error.
 * Return: 0 or -EINVAL with @err naming the line.
 */
int setup_pins_parse(const char *text, struct setup_pins *ret, struct sbx_error *err);

/** setup_pins_done() - free what @p holds (not @p). */
void setup_pins_done(struct setup_pins *p);

/**
 * setup_images_dir() - the images directory by the lookup order above.
 * @ret_dir: a new string the caller frees.
 * Return: 0, or -ENOENT with @err listing the places tried.
 */
int setup_images_dir(char **ret_dir, struct sbx_error *err);

/**
 * setup_pins_load() - setup_images_dir() + read and parse its `pins`.
 * Return: 0 or -errno with @err.
 */
int setup_pins_load(struct setup_pins *ret, struct sbx_error *err);
