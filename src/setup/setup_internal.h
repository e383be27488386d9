/* setup_internal.h - helpers shared by the setup module's files (and its unit test). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

/** setup_progress_line() - one progress report: "<label>: <verb> X of Y MB (P%), R MB/s". */
void setup_progress_line(FILE *out, bool tty, const char *label, const char *verb, uint64_t done,
                         uint64_t total, double seconds, bool final);
