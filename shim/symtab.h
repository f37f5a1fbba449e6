/* SPDX-License-Identifier: MIT */
#ifndef LUPC_SYMTAB_H
#define LUPC_SYMTAB_H
#include <stddef.h>
/* every exported driver symbol, sorted by name (generated shim_symtab.c) */
struct lupc_sym {
        const char *name;
        void *fn;
};
extern const struct lupc_sym lupc_symbols[];
extern const size_t lupc_n_symbols;
/* base name -> symbol per CUDA version, from cudaTypedefs.h, sorted by base then version */
struct lupc_symver {
        const char *base;
        int version;
        const char *sym;
        const char *per_thread_sym; /* NULL when there is none */
};
extern const struct lupc_symver lupc_symvers[];
extern const size_t lupc_n_symvers;
/* LUPINE_TRACE=3: wrappers that log each call and its result, sorted by
 * name (generated shim_trace.c); cuGetProcAddress hands them out instead */
extern const struct lupc_sym lupc_trace_symbols[];
extern const size_t lupc_n_trace_symbols;
#endif
