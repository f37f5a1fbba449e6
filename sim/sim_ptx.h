/* SPDX-License-Identifier: MIT */
/*
 * Module images and the PTX the sim reads out of them. Pure functions over
 * caller-supplied bytes: no driver state, no locks, no output, so that a
 * fuzzer can drive them directly.
 *
 * The sim cannot run GPU code. From PTX it learns what the driver would
 * learn from any image: the kernels (entry names, parameter layout, static
 * shared memory) and the module-scope variables (size, alignment, initial
 * bytes). Kernels then run as host twins (sim_twins.c).
 */
#ifndef LUPINE_SIM_PTX_H
#define LUPINE_SIM_PTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_PTX_MAX_ENTRIES     4096
#define SIM_PTX_MAX_PARAMS      4096
#define SIM_PTX_MAX_GLOBALS     4096
#define SIM_PTX_MAX_NAME        1024
#define SIM_PTX_MAX_DEPTH       64      /* nested braces in an initialiser */
#define SIM_PTX_MAX_PARAM_BYTES 32764   /* the driver's limit on sm_70+ */
#define SIM_PTX_MAX_VAR_BYTES   (256u << 20) /* one module-scope variable */

/* ---- a bounds-checked reader for untrusted bytes ---- */
struct sim_reader {
        const uint8_t *p;
        size_t len;
        size_t off;
};

/* Each returns -EBADMSG, leaving the output and the position untouched,
 * when fewer bytes remain than it needs. Little-endian, as in every
 * image format the driver reads. */
int sim_rd_u16(struct sim_reader *r, uint16_t *ret);
int sim_rd_u32(struct sim_reader *r, uint32_t *ret);
int sim_rd_u64(struct sim_reader *r, uint64_t *ret);
int sim_rd_skip(struct sim_reader *r, size_t n);
/* A sub-reader over the next n bytes; the parent moves past them. */
int sim_rd_sub(struct sim_reader *r, size_t n, struct sim_reader *ret);

/* ---- images ---- */
enum sim_image_result {
        SIM_IMAGE_OK = 0,
        SIM_IMAGE_INVALID,      /* not an image, or a malformed one */
        SIM_IMAGE_NO_BINARY,    /* well formed, but nothing the sim can run */
};

#define SIM_FATBIN_MAGIC        0xBA55ED50u
#define SIM_FATBINC_MAGIC       0x466243B1
#define SIM_FATBIN_KIND_PTX     1
#define SIM_FATBIN_KIND_ELF     2

/* Finds the PTX text in a module image known only by its address, as
 * cuModuleLoadData receives it: PTX text (NUL-terminated within max_len
 * bytes), a fatbin, a fatbinC wrapper or an ELF cubin.
 * Every read past the first header is bounded by the sizes that header
 * claims. On success *ret_text and *ret_len point into the image (len
 * excludes the NUL). */
enum sim_image_result sim_image_find_ptx(const void *image, size_t max_len,
                                         const char **ret_text, size_t *ret_len);
/* The same for an image whose exact size is known (a file). */
enum sim_image_result sim_image_find_ptx_sized(const void *image, size_t size,
                                               const char **ret_text, size_t *ret_len);

/* ---- PTX ---- */
struct sim_ptx_param {
        uint32_t offset;
        uint32_t size;
        uint32_t align;
};

struct sim_ptx_entry {
        char *name;
        uint32_t nparams;
        struct sim_ptx_param *params;
        uint32_t param_bytes;   /* end of the last parameter */
        uint32_t static_smem;   /* .shared declared in the body */
};

struct sim_ptx_global {
        char *name;
        size_t size;
        uint32_t align;
        uint8_t *init;          /* the first init_len bytes; the rest are zero */
        size_t init_len;
        int is_const;           /* .const rather than .global */
};

/* A name the module declares .extern: defined by another input of a link. */
struct sim_ptx_extern {
        char *name;
        bool is_func; /* a .func; else a variable */
};

struct sim_ptx_module {
        unsigned version_major, version_minor;
        unsigned target_sm;     /* 90 for .target sm_90 */
        size_t nentries;
        struct sim_ptx_entry *entries;
        size_t nglobals;
        struct sim_ptx_global *globals;
        /* for linking (sim_link.c) */
        size_t body_off; /* where the text after .version/.target/.address_size starts */
        size_t nfuncs;
        char **funcs; /* .func definitions (with a body) */
        size_t nexterns;
        struct sim_ptx_extern *externs;
};

/* Parses len bytes of PTX. -EBADMSG for text that is not well-formed PTX
 * at the level the sim reads it (directives, parameter lists, balanced
 * bodies, initialisers), -E2BIG past a SIM_PTX_MAX_* limit, -ENOMEM. */
int sim_ptx_parse(const char *text, size_t len, struct sim_ptx_module **ret);
void sim_ptx_free(struct sim_ptx_module *m);

const struct sim_ptx_entry *sim_ptx_find_entry(const struct sim_ptx_module *m, const char *name);

#endif
