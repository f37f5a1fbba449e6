/* SPDX-License-Identifier: MIT */
#ifndef LUPC_ERRORS_H
#define LUPC_ERRORS_H
#include <stddef.h>
struct lupc_errname {
        int code;
        const char *name;
};
/* sorted by code (generated from cuda.h into shim_errors.c) */
extern const struct lupc_errname lupc_errnames[];
extern const size_t lupc_n_errnames;
#endif
