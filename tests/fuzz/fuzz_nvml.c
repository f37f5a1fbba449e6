/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the NVML snapshot decoder (common/nvml_codec.c), which
 * libnvidia-ml.so.1 runs on every byte lupined sends it, and for the
 * supervisor's request decoder.
 *
 * Beyond "no crash": a refused input has a reason; an accepted snapshot
 * holds only what the limits allow (devices, processes, NUL-terminated
 * strings within LUP_NVML_MAX_STR), encodes again within LUP_NVML_MAX_REPLY,
 * and that encoding decodes to the same snapshot.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_vals(const struct lup_nvml_val *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                assert(memchr(v[i].str, 0, sizeof(v[i].str)) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct lup_nvml_snapshot a, b;
        static uint8_t again[LUP_NVML_MAX_REPLY];
        const char *why = NULL;
        size_t len;

        if (lup_nvml_req_decode(data, size, &why) < 0)
                assert(why != NULL);
        why = NULL;
        int rc = lup_nvml_decode(data, size, &a, &why);
        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0) {
                assert(why != NULL);
                return 0;
        }
        assert(a.n_devices <= LUP_MAX_DEVICES);
        check_vals(a.sys, LUP_NVML_N_SYS);
        for (uint32_t d = 0; d < a.n_devices; d++) {
                assert(a.dev[d].n_procs <= LUP_NVML_MAX_PROCS);
                check_vals(a.dev[d].v, LUP_NVML_N_DEV);
        }
        assert(lup_nvml_encode(&a, again, sizeof(again), &len) == 0);
        assert(lup_nvml_decode(again, len, &b, &why) == 0);
        assert(b.n_devices == a.n_devices && b.backend == a.backend && b.taken_ms == a.taken_ms);
        for (unsigned k = 0; k < LUP_NVML_N_SYS; k++) {
                assert(b.sys[k].ret == a.sys[k].ret);
                assert(a.sys[k].ret || strcmp(b.sys[k].str, a.sys[k].str) == 0);
                assert(a.sys[k].ret || b.sys[k].num == a.sys[k].num);
        }
        for (uint32_t d = 0; d < a.n_devices; d++) {
                assert(b.dev[d].n_procs == a.dev[d].n_procs);
                assert(memcmp(b.dev[d].procs, a.dev[d].procs, a.dev[d].n_procs * sizeof(a.dev[d].procs[0])) == 0);
                for (unsigned k = 0; k < LUP_NVML_N_DEV; k++) {
                        const struct lup_nvml_val *x = &a.dev[d].v[k], *y = &b.dev[d].v[k];
                        assert(x->ret == y->ret);
                        assert(x->ret || (x->num == y->num && strcmp(x->str, y->str) == 0));
                }
        }
        return 0;
}
