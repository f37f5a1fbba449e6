/* SPDX-License-Identifier: MIT */
/*
 * Probe for issue 16: what nvidia-smi's private NVML table slots take and
 * give. An LD_PRELOAD library: it catches nvidia-smi's lookup of
 * nvmlInternalGetExportTable (by dlsym or by binding), asks the library
 * behind it for the table, and hands nvidia-smi a copy whose every slot
 * logs its first six integer arguments, the 64 bytes each pointer argument
 * points at before and after the call, and the return value. Slots taking
 * floating-point or more than six arguments are not expected in the views
 * probed; the probe is for learning, not for shipping.
 *
 *   gcc -shared -fPIC -O1 -o nvsmi_proxy.so nvsmi_proxy.c -ldl
 *   LD_PRELOAD=./nvsmi_proxy.so NVSMI_PROXY_LOG=/tmp/x nvidia-smi dmon -c 1
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

typedef int (*get_table_fn)(const void **, const void *);
typedef uint64_t (*slot_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

enum {
        MAX_SLOTS = 512,
        PEEK = 64
};
static slot_fn real_slot[MAX_SLOTS];
static uint64_t proxy_table[MAX_SLOTS];
static get_table_fn real_get;
static FILE *logf;

static FILE *out(void)
{
        if (!logf) {
                const char *p = getenv("NVSMI_PROXY_LOG");
                logf = p ? fopen(p, "a") : NULL;
                if (!logf)
                        logf = stderr;
                setvbuf(logf, NULL, _IOLBF, 0);
        }
        return logf;
}

static int peek(uint64_t addr, uint8_t *buf)
{
        struct iovec l = { buf, PEEK }, r = { (void *)(uintptr_t)addr, PEEK };
        if (addr < 65536)
                return 0;
        return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == PEEK;
}

static void hex(const char *tag, int i, const uint8_t *b)
{
        fprintf(out(), "    %s a%d:", tag, i);
        for (int k = 0; k < PEEK; k++)
                fprintf(out(), "%s%02x", k % 4 ? "" : " ", b[k]);
        fputc('\n', out());
}

static uint64_t call(unsigned slot, uint64_t a[6])
{
        uint8_t before[6][PEEK], after[PEEK];
        int ok[6];
        uint64_t r;

        fprintf(out(), "slot %u (%#lx, %#lx, %#lx, %#lx, %#lx, %#lx)\n", slot, (unsigned long)a[0], (unsigned long)a[1],
                (unsigned long)a[2], (unsigned long)a[3], (unsigned long)a[4], (unsigned long)a[5]);
        for (int i = 0; i < 6; i++)
                if ((ok[i] = peek(a[i], before[i])))
                        hex("in ", i, before[i]);
        r = real_slot[slot](a[0], a[1], a[2], a[3], a[4], a[5]);
        fprintf(out(), "  -> %d\n", (int)r);
        for (int i = 0; i < 6; i++)
                if (ok[i] && peek(a[i], after) && memcmp(after, before[i], PEEK) != 0)
                        hex("out", i, after);
        return r;
}

/* clang-format off */
#define SLOT(h, l) static uint64_t s_##h##_##l(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, \
                                       uint64_t f) { uint64_t v[6] = { a, b, c, d, e, f }; return call(8 * h + l, v); }
#define PTR(h, l) s_##h##_##l,
#define EIGHT(M, h) M(h, 0) M(h, 1) M(h, 2) M(h, 3) M(h, 4) M(h, 5) M(h, 6) M(h, 7)
#define ALL(M) EIGHT(M, 0) EIGHT(M, 1) EIGHT(M, 2) EIGHT(M, 3) EIGHT(M, 4) EIGHT(M, 5) EIGHT(M, 6) EIGHT(M, 7) \
        EIGHT(M, 8) EIGHT(M, 9) EIGHT(M, 10) EIGHT(M, 11) EIGHT(M, 12) EIGHT(M, 13) EIGHT(M, 14) EIGHT(M, 15) \
        EIGHT(M, 16) EIGHT(M, 17) EIGHT(M, 18) EIGHT(M, 19) EIGHT(M, 20) EIGHT(M, 21) EIGHT(M, 22) EIGHT(M, 23) \
        EIGHT(M, 24) EIGHT(M, 25) EIGHT(M, 26) EIGHT(M, 27) EIGHT(M, 28) EIGHT(M, 29) EIGHT(M, 30) EIGHT(M, 31)
ALL(SLOT)
static slot_fn const proxies[256] = { ALL(PTR) };
/* clang-format on */

static int proxy_get(const void **table, const void *id)
{
        const uint64_t *t;
        int r = real_get(table, id);
        size_t n;

        fprintf(out(), "nvmlInternalGetExportTable -> %d\n", r);
        if (r != 0 || !*table)
                return r;
        t = *table;
        n = t[0] / 8;
        if (n > 256)
                n = 256;
        fprintf(out(), "table of %zu slots (%lu bytes)\n", n, (unsigned long)t[0]);
        proxy_table[0] = t[0];
        for (size_t i = 1; i < n; i++) {
                real_slot[i] = (slot_fn)(uintptr_t)t[i];
                proxy_table[i] = t[i] ? (uint64_t)(uintptr_t)proxies[i] : 0;
        }
        *table = proxy_table;
        return r;
}

static void *real_dlsym(void *h, const char *name)
{
        static void *(*fn)(void *, const char *);
        if (!fn)
                fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!fn)
                fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        return fn(h, name);
}

void *dlsym(void *h, const char *name)
{
        void *p = real_dlsym(h, name);
        if (p && strcmp(name, "nvmlInternalGetExportTable") == 0) {
                real_get = (get_table_fn)p;
                return (void *)proxy_get;
        }
        return p;
}

int nvmlInternalGetExportTable(const void **table, const void *id)
{
        if (!real_get)
                real_get = (get_table_fn)real_dlsym(RTLD_NEXT, "nvmlInternalGetExportTable");
        if (!real_get)
                return 999;
        return proxy_get(table, id);
}
