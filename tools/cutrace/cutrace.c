/* SPDX-License-Identifier: MIT */
/*
 * lupine-cutrace: an rtld-audit module (LD_AUDIT) that logs every call a
 * program makes into libcuda.so.1, whichever libcuda that is: NVIDIA's
 * driver or lupine's shim. It exists to compare the two on the same
 * program: what a library does next after an answer it does not like is
 * invisible from inside the shim when the library called a symbol it found
 * with dlsym().
 *
 *   LD_AUDIT=/path/liblupine-cutrace.so CUTRACE_FILE=/tmp/t.log program...
 *
 * How: the loader asks la_symbind64() for every binding (PLT and dlsym) from
 * any object to libcuda; for names starting with "cu" the module returns a
 * small generated trampoline instead of the driver's address. The trampoline
 * logs the thread, the name and the first six integer arguments, calls the
 * real function with the caller's stack untouched (the return address is
 * kept on a per-thread shadow stack meanwhile), and logs the CUresult and,
 * for getters, the first 8 bytes the call wrote through its first argument
 * (for an int, the upper half is whatever was there before).
 * Pointers handed out by cuGetProcAddress and the slots of export tables
 * that carry their size in word 0 are wrapped the same way.
 *
 * x86-64 only. Floating-point arguments are not preserved across the entry
 * hook; no driver function that matters here takes one by value.
 */
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "lupine-cutrace builds on x86-64 only"
#endif

#define MAX_TRAMPS 8192
#define TRAMP_BYTES 128
#define SHADOW_DEPTH 256

struct tramp {
        char name[64];
        uint64_t target;
        int string_arg; /* index of an argument that is a C string, or -1 */
        int out_arg;    /* index of an out-pointer to show after success, or -1 */
};

static struct tramp tramps[MAX_TRAMPS];
static int n_tramps;
static uint8_t *code;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static uintptr_t cuda_cookie;

struct frame {
        uint64_t ret;
        uint64_t args[6];
};
static __thread struct frame shadow[SHADOW_DEPTH];
static __thread int depth;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
        struct timespec ts;
        va_list ap;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        flockfile(out);
        fprintf(out, "%ld.%06ld %ld ", (long)ts.tv_sec, ts.tv_nsec / 1000, (long)syscall(SYS_gettid));
        va_start(ap, fmt);
        vfprintf(out, fmt, ap);
        va_end(ap);
        fputc('\n', out);
        fflush(out);
        funlockfile(out);
}

/* Reads memory that may not be mapped (a lupine handle is not a pointer). */
static int peek(uint64_t addr, void *buf, size_t n)
{
        struct iovec local = { buf, n }, remote = { (void *)(uintptr_t)addr, n };
        return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static void show_string(char *dst, size_t cap, uint64_t p)
{
        size_t i = 0;
        if (!p) {
                snprintf(dst, cap, "NULL");
                return;
        }
        for (; i + 1 < cap; i++) {
                char c;
                if (peek(p + i, &c, 1) < 0 || !c)
                        break;
                dst[i] = (c >= 32 && c < 127) ? c : '?';
        }
        dst[i] = 0;
}

/* Called by a trampoline on entry: log, push the return address. */
static void enter_hook(uint64_t idx, const uint64_t *regs, uint64_t ret)
{
        const struct tramp *t = &tramps[idx];
        char s[200] = "";

        if (t->string_arg >= 0)
                show_string(s, sizeof(s), regs[t->string_arg]);
        /* regs[6] is the return address, regs[7] and regs[8] the first
         * two arguments passed on the stack (garbage for short lists) */
        logf_("> %s(%#lx, %#lx, %#lx, %#lx, %#lx, %#lx | %#lx, %#lx)%s%s%s", t->name, regs[0], regs[1], regs[2],
              regs[3], regs[4], regs[5], regs[7], regs[8], *s ? " \"" : "", s, *s ? "\"" : "");
        if (depth >= SHADOW_DEPTH) {
                logf_("shadow stack overflow in %s", t->name);
                abort();
        }
        shadow[depth].ret = ret;
        memcpy(shadow[depth].args, regs, sizeof(shadow[depth].args));
        depth++;
}

/* Called by a trampoline after the real function returned: log, pop. */
static uint64_t exit_hook(uint64_t idx, uint64_t result)
{
        const struct tramp *t = &tramps[idx];
        struct frame *f = &shadow[--depth];
        uint64_t v;

        uint64_t v2;
        if (t->name[0] == 'E' && (int)result == 0 && peek(f->args[0], &v, 8) == 0 && peek(f->args[1], &v2, 8) == 0)
                logf_("< %s = %d, *arg0 %#lx, *arg1 %#lx", t->name, (int)result, v, v2);
        else if (t->out_arg >= 0 && (int)result == 0 && f->args[t->out_arg] &&
                 peek(f->args[t->out_arg], &v, sizeof(v)) == 0)
                logf_("< %s = %d, out %#lx", t->name, (int)result, v);
        else
                logf_("< %s = %d", t->name, (int)result);
        return f->ret;
}

static uint8_t *emit(uint8_t *p, const void *bytes, size_t n)
{
        memcpy(p, bytes, n);
        return p + n;
}

static uint8_t *emit_imm64(uint8_t *p, uint8_t rex, uint8_t op, uint64_t v)
{
        *p++ = rex;
        *p++ = op;
        memcpy(p, &v, 8);
        return p + 8;
}

/* See the file comment; the stack is 16-byte aligned at each call. */
static void build_tramp(uint8_t *p, uint64_t idx, uint64_t target)
{
        static const uint8_t save[] = { 0x41, 0x51, 0x41, 0x50, 0x51, 0x52, 0x56, 0x57, /* push r9 r8 rcx rdx rsi rdi */
                                        0x48, 0x83, 0xec, 0x08 };                      /* sub rsp, 8 */
        static const uint8_t args[] = { 0x48, 0x8d, 0x74, 0x24, 0x08,                  /* lea rsi, [rsp+8] */
                                        0x48, 0x8b, 0x54, 0x24, 0x38 };                /* mov rdx, [rsp+56] */
        static const uint8_t call_r11[] = { 0x41, 0xff, 0xd3 };
        static const uint8_t restore[] = { 0x48, 0x83, 0xc4, 0x08,                     /* add rsp, 8 */
                                           0x5f, 0x5e, 0x5a, 0x59, 0x41, 0x58, 0x41, 0x59, /* pop rdi rsi rdx rcx r8 r9 */
                                           0x48, 0x83, 0xc4, 0x08 };                   /* add rsp, 8 (return address) */
        static const uint8_t after[] = { 0x48, 0x83, 0xec, 0x08,                       /* sub rsp, 8 */
                                         0x50,                                         /* push rax */
                                         0x48, 0x89, 0xc6 };                           /* mov rsi, rax */
        static const uint8_t finish[] = { 0x48, 0x89, 0x44, 0x24, 0x08,                /* mov [rsp+8], rax */
                                          0x58,                                        /* pop rax */
                                          0xc3 };                                      /* ret */
        p = emit(p, save, sizeof(save));
        p = emit_imm64(p, 0x48, 0xbf, idx); /* mov rdi, idx */
        p = emit(p, args, sizeof(args));
        p = emit_imm64(p, 0x49, 0xbb, (uint64_t)(uintptr_t)enter_hook); /* mov r11, enter_hook */
        p = emit(p, call_r11, sizeof(call_r11));
        p = emit(p, restore, sizeof(restore));
        p = emit_imm64(p, 0x49, 0xbb, target);
        p = emit(p, call_r11, sizeof(call_r11));
        p = emit(p, after, sizeof(after));
        p = emit_imm64(p, 0x48, 0xbf, idx);
        p = emit_imm64(p, 0x49, 0xbb, (uint64_t)(uintptr_t)exit_hook);
        p = emit(p, call_r11, sizeof(call_r11));
        emit(p, finish, sizeof(finish));
}

static const struct {
        const char *name;
        int string_arg;
} string_args[] = {
        { "cuGetProcAddress", 0 },     { "cuGetProcAddress_v2", 0 }, { "cuLibraryGetKernel", 2 },
        { "cuModuleGetFunction", 2 },  { "cuModuleGetGlobal_v2", 3 }, { "cuLibraryGetGlobal", 3 },
        { "cuLibraryGetManaged", 3 },  { "cuModuleGetTexRef", 2 },
};

static int is_getter(const char *n)
{
        return strstr(n, "Get") || strstr(n, "Create") || strstr(n, "Load") || strstr(n, "Retain") ||
               strstr(n, "Alloc") || strstr(n, "Current") || strstr(n, "Query") || strstr(n, "ProcAddress");
}

static void *wrap(const char *name, uint64_t target)
{
        void *fn = NULL;

        pthread_mutex_lock(&lock);
        /* one trampoline per function, whatever it was looked up as: a
         * program may compare what dlsym and cuGetProcAddress gave it */
        for (int i = 0; i < n_tramps; i++) {
                if (tramps[i].target == target) {
                        fn = code + (size_t)i * TRAMP_BYTES;
                        goto done;
                }
        }
        if (n_tramps == MAX_TRAMPS)
                goto done;
        struct tramp *t = &tramps[n_tramps];
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->target = target;
        t->string_arg = -1;
        for (size_t i = 0; i < sizeof(string_args) / sizeof(string_args[0]); i++)
                if (!strcmp(string_args[i].name, name))
                        t->string_arg = string_args[i].string_arg;
        t->out_arg = is_getter(name) ? 0 : -1;
        if (!strncmp(name, "cuGetProcAddress", 16))
                t->out_arg = 1;
        fn = code + (size_t)n_tramps * TRAMP_BYTES;
        build_tramp(fn, (uint64_t)n_tramps, target);
        n_tramps++;
done:
        pthread_mutex_unlock(&lock);
        return fn;
}

/* ---- cuGetProcAddress and cuGetExportTable hand out more functions */

typedef int (*gpa_v2_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t);
typedef int (*get_export_fn)(const void **, const void *);
static gpa_v2_fn real_gpa_v2;
static gpa_fn real_gpa;
static get_export_fn real_get_export;

static int my_gpa_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status);
static int my_gpa(const char *symbol, void **pfn, int version, uint64_t flags);
static int my_get_export(const void **table, const void *uuid);

static void wrap_proc(const char *symbol, void **pfn, int version)
{
        if (!symbol || !pfn || !*pfn)
                return;
        /* the lookup functions themselves, found through cuGetProcAddress:
         * cuGetProcAddress at version 12000 and later is the _v2 ABI */
        if (!strcmp(symbol, "cuGetProcAddress")) {
                if (version >= 12000) {
                        real_gpa_v2 = (gpa_v2_fn)*pfn;
                        *pfn = (void *)my_gpa_v2;
                } else {
                        real_gpa = (gpa_fn)*pfn;
                        *pfn = (void *)my_gpa;
                }
                return;
        }
        if (!strcmp(symbol, "cuGetExportTable")) {
                real_get_export = (get_export_fn)*pfn;
                *pfn = (void *)my_get_export;
                return;
        }
        {
                char name[64];
                snprintf(name, sizeof(name), "%s", symbol);
                void *w = wrap(name, (uint64_t)(uintptr_t)*pfn);
                if (w)
                        *pfn = w;
        }
}

static int my_gpa_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
        int r = real_gpa_v2(symbol, pfn, version, flags, status);
        logf_("  cuGetProcAddress_v2(%s, %d, flags %#lx) = %d status %d", symbol ? symbol : "NULL", version, flags, r,
              status ? *status : -1);
        if (r == 0)
                wrap_proc(symbol, pfn, version);
        return r;
}

static int my_gpa(const char *symbol, void **pfn, int version, uint64_t flags)
{
        int r = real_gpa(symbol, pfn, version, flags);
        logf_("  cuGetProcAddress(%s, %d, flags %#lx) = %d", symbol ? symbol : "NULL", version, flags, r);
        if (r == 0)
                wrap_proc(symbol, pfn, version);
        return r;
}

#define MAX_TABLES 64
static struct {
        uint8_t id[16];
        const void *real;
        uint64_t *copy;
} tables[MAX_TABLES];
static int n_tables;

/* A table whose word 0 is its own size gets a copy with wrapped slots. */
static const void *wrap_table(const uint8_t *id, const void *real)
{
        const uint64_t *w = real;
        uint64_t size;
        const void *res = real;

        if (peek((uint64_t)(uintptr_t)w, &size, 8) < 0 || size < 16 || size > 4096 || size % 8)
                return real;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < n_tables; i++)
                if (!memcmp(tables[i].id, id, 16) && tables[i].real == real) {
                        res = tables[i].copy;
                        pthread_mutex_unlock(&lock);
                        return res;
                }
        pthread_mutex_unlock(&lock);
        if (n_tables == MAX_TABLES)
                return real;
        uint64_t *copy = malloc(size);
        if (!copy)
                return real;
        memcpy(copy, w, size);
        for (size_t s = 1; s < size / 8; s++) {
                char name[64];
                if (!copy[s])
                        continue;
                snprintf(name, sizeof(name), "ET%02x%02x%02x%02x[%zu]", id[0], id[1], id[2], id[3], s);
                void *t = wrap(name, copy[s]);
                if (t)
                        copy[s] = (uint64_t)(uintptr_t)t;
        }
        pthread_mutex_lock(&lock);
        if (n_tables < MAX_TABLES) {
                memcpy(tables[n_tables].id, id, 16);
                tables[n_tables].real = real;
                tables[n_tables].copy = copy;
                n_tables++;
                res = copy;
        }
        pthread_mutex_unlock(&lock);
        return res;
}

static int my_get_export(const void **table, const void *uuid)
{
        int r = real_get_export(table, uuid);
        const uint8_t *u = uuid;
        if (u)
                logf_("  cuGetExportTable(%02x%02x%02x%02x-%02x%02x%02x%02x...) = %d table %p", u[0], u[1], u[2], u[3],
                      u[4], u[5], u[6], u[7], r, table ? *table : NULL);
        /* the integrity answer hashes the addresses of these two tables and
         * of the integrity slot as the caller sees them: they stay unwrapped */
        static const uint8_t cudart_if[4] = { 0x6b, 0xd5, 0xfb, 0x6c }, integrity[4] = { 0xd4, 0x08, 0x20, 0x55 };
        if (r == 0 && table && *table && u && !getenv("CUTRACE_NO_TABLES") && memcmp(u, cudart_if, 4) != 0 &&
            memcmp(u, integrity, 4) != 0)
                *table = wrap_table(u, *table);
        return r;
}

/* ---- the rtld-audit interface */

__attribute__((visibility("default"))) unsigned int la_version(unsigned int version)
{
        const char *path = getenv("CUTRACE_FILE");
        out = path ? fopen(path, "w") : NULL;
        if (!out)
                out = stderr;
        code = mmap(NULL, (size_t)MAX_TRAMPS * TRAMP_BYTES, PROT_READ | PROT_WRITE | PROT_EXEC,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (code == MAP_FAILED) {
                fprintf(stderr, "lupine-cutrace: cannot map trampolines; not tracing\n");
                return 0;
        }
        return version < LAV_CURRENT ? version : LAV_CURRENT;
}

__attribute__((visibility("default"))) unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
        (void)lmid;
        const char *base = strrchr(map->l_name, '/');
        base = base ? base + 1 : map->l_name;
        if (!strncmp(base, "libcuda.so", 10)) {
                cuda_cookie = (uintptr_t)cookie;
                logf_("  libcuda is %s", map->l_name);
        }
        return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

__attribute__((visibility("default"))) uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook, unsigned int *flags,
                       const char *symname)
{
        (void)ndx;
        (void)refcook;
        *flags |= LA_SYMB_NOPLTENTER | LA_SYMB_NOPLTEXIT;
        if (!cuda_cookie || (uintptr_t)defcook != cuda_cookie || strncmp(symname, "cu", 2) != 0 || !code)
                return sym->st_value;
        if (!strcmp(symname, "cuGetProcAddress_v2")) {
                real_gpa_v2 = (gpa_v2_fn)sym->st_value;
                return (uintptr_t)my_gpa_v2;
        }
        if (!strcmp(symname, "cuGetProcAddress")) {
                real_gpa = (gpa_fn)sym->st_value;
                return (uintptr_t)my_gpa;
        }
        if (!strcmp(symname, "cuGetExportTable")) {
                real_get_export = (get_export_fn)sym->st_value;
                return (uintptr_t)my_get_export;
        }
        void *t = wrap(symname, sym->st_value);
        return t ? (uintptr_t)t : sym->st_value;
}
