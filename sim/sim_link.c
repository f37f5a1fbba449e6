/* SPDX-License-Identifier: MIT */
/*
 * JIT linking (cuLink*) over the PTX the sim reads.
 *
 * Each input is parsed when it is added, as the driver compiles PTX then:
 * PTX text, or the PTX inside a cubin or fatbin the sim made or nvcc
 * built with PTX embedded. cuLinkComplete resolves every .extern (a .func
 * or a variable) against what the inputs define, refuses a name defined
 * twice, and joins the inputs into one PTX text under one header: that
 * text is the "cubin", and the sim's own module loader takes it. Host
 * objects and libraries of them are not something the sim can read.
 *
 * The logs are short and real: one line per input added, one for the
 * link, and what went wrong. Their size options are written back as the
 * bytes filled including the NUL (0 when empty), the wall time in ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim_module.h"

#define SIM_LINK_MAGIC      0x4c494e4bu
#define SIM_LINK_MAX_INPUTS 4096

struct link_input {
        char *name;
        char *text; /* the PTX, NUL-terminated */
        size_t len;
        struct sim_ptx_module *ptx;
};

struct sim_link {
        uint32_t magic;
        unsigned nopts;
        CUjit_option *options; /* the caller's: the answers go there */
        void **values;
        char *info, *error;
        unsigned info_cap, error_cap;
        size_t info_len, error_len;
        double wall_ms;
        size_t ninputs;
        bool poisoned; /* an input was refused: as the H200's driver, nothing links any more */
        struct link_input *inputs;
        char *cubin;
        size_t cubin_len;
};

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void logf_to(char *buf, unsigned cap, size_t *len, const char *fmt, ...)
{
        va_list ap;

        if (!buf || cap == 0 || *len + 1 >= cap)
                return;
        va_start(ap, fmt);
        int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
        va_end(ap);
        if (n > 0)
                *len = *len + (size_t)n < cap - 1 ? *len + (size_t)n : cap - 1;
}

#define info_log(l, ...)  logf_to((l)->info, (l)->info_cap, &(l)->info_len, __VA_ARGS__)
#define error_log(l, ...) logf_to((l)->error, (l)->error_cap, &(l)->error_len, __VA_ARGS__)

/* The size and time options, written back after every call. */
static void answer(struct sim_link *l)
{
        for (unsigned i = 0; i < l->nopts; i++) {
                if (l->options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && l->info)
                        l->values[i] = (void *)(uintptr_t)(l->info_len ? l->info_len + 1 : 0);
                else if (l->options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES && l->error)
                        l->values[i] = (void *)(uintptr_t)(l->error_len ? l->error_len + 1 : 0);
                else if (l->options[i] == CU_JIT_WALL_TIME) {
                        float ms = (float)l->wall_ms;
                        l->values[i] = NULL;
                        memcpy(&l->values[i], &ms, sizeof(ms));
                }
        }
}

static struct sim_link *link_get(CUlinkState h)
{
        struct sim_link *l = (struct sim_link *)h;
        return l && l->magic == SIM_LINK_MAGIC ? l : NULL;
}

SIM_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                 CUlinkState *stateOut)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_link *l;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!stateOut || numOptions > SIM_MAX_JIT_OPTIONS || (numOptions && (!options || !optionValues)))
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < numOptions; i++)
                if ((unsigned)options[i] >= CU_JIT_NUM_OPTIONS)
                        return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        if (r != CUDA_SUCCESS)
                return r;
        if (!(l = calloc(1, sizeof(*l))))
                return CUDA_ERROR_OUT_OF_MEMORY;
        l->magic = SIM_LINK_MAGIC;
        l->nopts = numOptions;
        l->options = options;
        l->values = optionValues;
        for (unsigned i = 0; i < numOptions; i++) {
                if (options[i] == CU_JIT_INFO_LOG_BUFFER)
                        l->info = optionValues[i];
                else if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
                        l->error = optionValues[i];
                else if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
                        l->info_cap = (unsigned)(uintptr_t)optionValues[i];
                else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                        l->error_cap = (unsigned)(uintptr_t)optionValues[i];
        }
        if (l->info && l->info_cap)
                l->info[0] = 0;
        if (l->error && l->error_cap)
                l->error[0] = 0;
        *stateOut = (CUlinkState)l;
        return CUDA_SUCCESS;
}

/* What kind of bytes data holds, as the input type claims them. */
static CUresult check_kind(struct sim_link *l, CUjitInputType type, const uint8_t *p, size_t size, const char *name)
{
        static const uint8_t elf[4] = { 0x7f, 'E', 'L', 'F' };
        uint32_t magic = 0;

        if (size >= 4)
                memcpy(&magic, p, 4);
        switch (type) {
        case CU_JIT_INPUT_PTX:
                return CUDA_SUCCESS; /* the parser decides */
        case CU_JIT_INPUT_CUBIN:
                if (size >= 4 && memcmp(p, elf, 4) == 0)
                        return CUDA_SUCCESS;
                break;
        case CU_JIT_INPUT_FATBINARY:
                if (magic == SIM_FATBIN_MAGIC || magic == SIM_FATBINC_MAGIC)
                        return CUDA_SUCCESS;
                break;
        case CU_JIT_INPUT_OBJECT:
        case CU_JIT_INPUT_LIBRARY:
                if ((size >= 4 && memcmp(p, elf, 4) == 0) || (size >= 8 && memcmp(p, "!<arch>\n", 8) == 0)) {
                        error_log(l, "sim: %s: host objects and libraries are not simulated\n", name);
                        return CUDA_ERROR_NOT_SUPPORTED;
                }
                break;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        error_log(l, "sim: %s: not a valid input of its type\n", name);
        return CUDA_ERROR_INVALID_IMAGE;
}

/* The PTX in p (size bytes, as the type says), copied and parsed. */
static CUresult read_input(struct sim_link *l, CUjitInputType type, const uint8_t *p, size_t size, const char *name,
                           struct link_input *in)
{
        const char *text;
        size_t len;
        enum sim_image_result res;
        CUresult r = check_kind(l, type, p, size, name);

        if (r != CUDA_SUCCESS)
                return r;
        if (type == CU_JIT_INPUT_PTX) {
                const char *nul = memchr(p, 0, size);
                text = (const char *)p;
                len = nul ? (size_t)(nul - text) : size;
                res = len ? SIM_IMAGE_OK : SIM_IMAGE_INVALID;
        } else {
                res = sim_image_find_ptx_sized(p, size, &text, &len);
        }
        if (res != SIM_IMAGE_OK) {
                error_log(l, "sim: %s: no PTX the simulator can read\n", name);
                /* the H200's driver answers INVALID_IMAGE for text that is not PTX too */
                return res == SIM_IMAGE_NO_BINARY && type != CU_JIT_INPUT_PTX ? CUDA_ERROR_NO_BINARY_FOR_GPU
                                                                              : CUDA_ERROR_INVALID_IMAGE;
        }
        if ((r = sim_module_parse(text, len, true, &in->ptx)) != CUDA_SUCCESS) {
                error_log(l, "sim: %s: PTX that does not compile (error %d)\n", name, (int)r);
                return r;
        }
        in->text = malloc(len + 1);
        in->name = strdup(name);
        if (!in->text || !in->name) {
                free(in->text);
                free(in->name);
                sim_ptx_free(in->ptx);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(in->text, text, len);
        in->text[len] = 0;
        in->len = len;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                                  unsigned int numOptions, CUjit_option *options, void **optionValues)
{
        struct sim_link *l = link_get(state);
        struct link_input in = { 0 }, *grown;
        double t0 = now_ms();
        char fallback[32];
        CUresult r;

        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        if (!data || size == 0 || size > SIM_MAX_IMAGE_BYTES || numOptions > SIM_MAX_JIT_OPTIONS ||
            (numOptions && (!options || !optionValues)))
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < numOptions; i++)
                if ((unsigned)options[i] >= CU_JIT_NUM_OPTIONS || options[i] == CU_JIT_WALL_TIME ||
                    options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER ||
                    options[i] == CU_JIT_TARGET_FROM_CUCONTEXT || options[i] == CU_JIT_TARGET)
                        return CUDA_ERROR_INVALID_VALUE; /* not for an input (cuda.h) */
        if (l->cubin || l->ninputs >= SIM_LINK_MAX_INPUTS)
                return CUDA_ERROR_INVALID_VALUE;
        if (!name) {
                snprintf(fallback, sizeof(fallback), "input %zu", l->ninputs);
                name = fallback;
        }
        if (l->poisoned)
                return CUDA_ERROR_INVALID_IMAGE;
        r = read_input(l, type, data, size, name, &in);
        if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_NO_BINARY_FOR_GPU)
                l->poisoned = true;
        if (r == CUDA_SUCCESS && !(grown = realloc(l->inputs, (l->ninputs + 1) * sizeof(*grown)))) {
                free(in.text);
                free(in.name);
                sim_ptx_free(in.ptx);
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS) {
                l->inputs = grown;
                l->inputs[l->ninputs++] = in;
                info_log(l, "sim: added %s: %zu kernels, %zu functions, %zu variables, %zu externs\n", name,
                         in.ptx->nentries, in.ptx->nfuncs, in.ptx->nglobals, in.ptx->nexterns);
        }
        l->wall_ms += now_ms() - t0;
        answer(l);
        return r;
}

SIM_API CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                                  CUjit_option *options, void **optionValues)
{
        struct stat st;
        size_t got = 0;
        uint8_t *buf;
        CUresult r;
        int fd;

        if (!link_get(state))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!path)
                return CUDA_ERROR_INVALID_VALUE;
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return CUDA_ERROR_FILE_NOT_FOUND;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
            (unsigned long long)st.st_size > SIM_MAX_IMAGE_BYTES || !(buf = malloc((size_t)st.st_size))) {
                close(fd);
                return CUDA_ERROR_INVALID_VALUE;
        }
        while (got < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        close(fd);
        r = got == (size_t)st.st_size ? cuLinkAddData_v2(state, type, buf, got, path, numOptions, options, optionValues)
                                      : CUDA_ERROR_FILE_NOT_FOUND;
        free(buf);
        return r;
}

/* What the driver's linker brings itself (the device runtime's calls). */
static bool builtin(const char *name)
{
        static const char *const names[] = {
                "vprintf", "malloc", "free", "__assertfail", "cudaGetParameterBufferV2", "cudaLaunchDeviceV2"
        };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(names[i], name) == 0)
                        return true;
        return false;
}

static bool defines(const struct sim_ptx_module *m, const char *name, bool is_func)
{
        if (is_func) {
                for (size_t i = 0; i < m->nfuncs; i++)
                        if (strcmp(m->funcs[i], name) == 0)
                                return true;
                return false;
        }
        for (size_t i = 0; i < m->nglobals; i++)
                if (strcmp(m->globals[i].name, name) == 0)
                        return true;
        return false;
}

/* Every extern defined once, nothing defined twice: 0, or an error logged. */
static CUresult resolve(struct sim_link *l)
{
        for (size_t i = 0; i < l->ninputs; i++) {
                const struct sim_ptx_module *m = l->inputs[i].ptx;
                for (size_t k = 0; k < m->nexterns; k++) {
                        const struct sim_ptx_extern *x = &m->externs[k];
                        size_t found = x->is_func && builtin(x->name);
                        for (size_t j = 0; j < l->ninputs; j++)
                                found += defines(l->inputs[j].ptx, x->name, x->is_func);
                        if (found == 0) {
                                error_log(l, "sim: undefined reference to '%s' in '%s'\n", x->name, l->inputs[i].name);
                                return CUDA_ERROR_INVALID_IMAGE;
                        }
                }
                for (size_t j = i + 1; j < l->ninputs; j++) {
                        const struct sim_ptx_module *o = l->inputs[j].ptx;
                        for (size_t k = 0; k < m->nfuncs; k++)
                                if (defines(o, m->funcs[k], true))
                                        goto twice;
                        for (size_t k = 0; k < m->nglobals; k++)
                                if (defines(o, m->globals[k].name, false))
                                        goto twice;
                        for (size_t k = 0; k < m->nentries; k++)
                                if (sim_ptx_find_entry(o, m->entries[k].name))
                                        goto twice;
                        continue;
twice:
                        error_log(l, "sim: a name is defined both in '%s' and in '%s'\n", l->inputs[i].name,
                                  l->inputs[j].name);
                        return CUDA_ERROR_INVALID_IMAGE;
                }
        }
        return CUDA_SUCCESS;
}

/* One PTX text: the newest version and target of the inputs, then each
 * input after its own header. */
static CUresult join(struct sim_link *l)
{
        unsigned major = 0, minor = 0, sm = 0;
        size_t n = 128;

        for (size_t i = 0; i < l->ninputs; i++) {
                const struct sim_ptx_module *m = l->inputs[i].ptx;
                if (m->version_major > major || (m->version_major == major && m->version_minor > minor))
                        major = m->version_major, minor = m->version_minor;
                if (m->target_sm > sm)
                        sm = m->target_sm;
                n += l->inputs[i].len - m->body_off + 64 + strlen(l->inputs[i].name);
        }
        char *out = malloc(n);
        if (!out)
                return CUDA_ERROR_OUT_OF_MEMORY;
        size_t len = (size_t)snprintf(out, n, ".version %u.%u\n.target sm_%u\n.address_size 64\n", major, minor, sm);
        for (size_t i = 0; i < l->ninputs; i++) {
                const struct link_input *in = &l->inputs[i];
                /* the name goes in a comment: no '*' '/' sequence can end it early */
                len += (size_t)snprintf(out + len, n - len, "\n// ---- input %zu\n", i);
                memcpy(out + len, in->text + in->ptx->body_off, in->len - in->ptx->body_off);
                len += in->len - in->ptx->body_off;
                out[len++] = '\n';
        }
        out[len++] = 0;
        l->cubin = out;
        l->cubin_len = len;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
        struct sim_link *l = link_get(state);
        struct sim_ptx_module *check;
        double t0 = now_ms();
        CUresult r;

        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        if (!cubinOut || !sizeOut)
                return CUDA_ERROR_INVALID_VALUE;
        if (l->poisoned)
                return CUDA_ERROR_INVALID_IMAGE;
        if (!l->cubin) {
                r = l->ninputs ? resolve(l) : CUDA_ERROR_INVALID_VALUE;
                if (r == CUDA_SUCCESS)
                        r = join(l);
                if (r == CUDA_SUCCESS) {
                        /* what the loader will take: parse it as it will */
                        r = sim_module_parse(l->cubin, l->cubin_len - 1, true, &check);
                        if (r == CUDA_SUCCESS) {
                                info_log(l, "sim: linked %zu inputs: %zu kernels\n", l->ninputs, check->nentries);
                                sim_ptx_free(check);
                        } else {
                                error_log(l, "sim: the linked inputs do not form one module\n");
                                free(l->cubin);
                                l->cubin = NULL;
                        }
                }
                l->wall_ms += now_ms() - t0;
                answer(l);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        *cubinOut = l->cubin;
        *sizeOut = l->cubin_len;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuLinkDestroy(CUlinkState state)
{
        struct sim_link *l = link_get(state);

        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        for (size_t i = 0; i < l->ninputs; i++) {
                free(l->inputs[i].name);
                free(l->inputs[i].text);
                sim_ptx_free(l->inputs[i].ptx);
        }
        free(l->inputs);
        free(l->cubin);
        l->magic = 0;
        free(l);
        return CUDA_SUCCESS;
}
