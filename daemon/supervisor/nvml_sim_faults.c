/* SPDX-License-Identifier: MIT */
/*
 * Faults of the simulated GPUs, so that CI can test the health watch
 * (supervisor/health.c, docs/health.md): LUPINE_SIM_FAULTS names a file,
 * read at every simulated snapshot, of lines
 *
 *     GPU temperature=C        the GPU's temperature
 *     GPU ecc_uncorrected=N    volatile uncorrectable ECC errors
 *     GPU retired_pending=N    pages waiting for retirement
 *     GPU remapped_pending=N   rows waiting for a remap
 *     GPU lost                 every NVML query fails with GPU_IS_LOST
 *     GPU xid=CODE             one Xid event, taken once
 *
 * Lines that are none of these are ignored with one warning. A test
 * writes the file, and truncates it to take the faults back.
 */
#define LUP_LOG_CAT LUP_LOGC_NVML
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "supervisor/nvml_values.h"

#define MAX_PENDING_XIDS 64

static struct lupd_xid pending[MAX_PENDING_XIDS];
static int n_pending;
static int xid_lines_seen; /* xid lines of the file already turned into events */

static void set_num(struct lup_nvml_dev *d, unsigned k, uint64_t v)
{
        lup_nvml_set_num(lup_nvml_devval(d, k), v);
}

static void make_lost(struct lup_nvml_dev *d)
{
        for (unsigned k = LUP_NVML_K_NAME; k < LUP_NVML_K_DEV_LAST; k++)
                lup_nvml_set_ret(lup_nvml_devval(d, k), 15 /* NVML_ERROR_GPU_IS_LOST */);
        d->n_procs = 0;
}

/* One line: 0, or -1 when it is not a fault line. */
static int apply_line(struct lup_nvml_snapshot *s, const char *line, int *xid_lines)
{
        unsigned gpu;
        char key[32];
        unsigned long long v = 0;
        int used = 0;

        if (sscanf(line, "%u %31[a-z_]%n", &gpu, key, &used) != 2)
                return -1;
        const char *rest = line + used;
        bool has_value = *rest == '=';
        if (has_value && sscanf(rest + 1, "%llu", &v) != 1)
                return -1;
        if (gpu >= s->n_devices || gpu >= LUP_MAX_DEVICES)
                return 0; /* a GPU the simulator does not show: nothing to fault */
        struct lup_nvml_dev *d = &s->dev[gpu];
        if (strcmp(key, "lost") == 0 && !has_value) {
                make_lost(d);
        } else if (strcmp(key, "temperature") == 0 && has_value) {
                set_num(d, LUP_NVML_K_TEMP_GPU, v);
        } else if (strcmp(key, "ecc_uncorrected") == 0 && has_value) {
                set_num(d, LUP_NVML_K_ECC_UNCORR_VOLATILE, v);
                set_num(d, LUP_NVML_K_ECC_UNCORR_AGGREGATE, v);
        } else if (strcmp(key, "retired_pending") == 0 && has_value) {
                set_num(d, LUP_NVML_K_RETIRED_PENDING, v);
        } else if (strcmp(key, "remapped_pending") == 0 && has_value) {
                set_num(d, LUP_NVML_K_REMAP_PENDING, v);
        } else if (strcmp(key, "xid") == 0 && has_value) {
                if (++*xid_lines > xid_lines_seen && n_pending < MAX_PENDING_XIDS)
                        pending[n_pending++] = (struct lupd_xid){ .device = (int)gpu, .xid = (uint32_t)v };
        } else {
                return -1;
        }
        return 0;
}

void lupd_nvml_sim_faults(struct lup_nvml_snapshot *s)
{
        static bool warned;
        const char *path = getenv("LUPINE_SIM_FAULTS");
        char line[256];
        int xid_lines = 0;

        if (!path || !*path)
                return;
        FILE *f = fopen(path, "re");
        if (!f) {
                xid_lines_seen = 0; /* a file made again starts its events anew */
                return;
        }
        while (fgets(line, sizeof(line), f)) {
                if (line[0] == '#' || line[0] == '\n')
                        continue;
                if (apply_line(s, line, &xid_lines) < 0 && !warned) {
                        warned = true;
                        lup_warn("LUPINE_SIM_FAULTS %s: ignoring a line that is no fault: %.80s", path, line);
                }
        }
        fclose(f);
        xid_lines_seen = xid_lines; /* a truncated file takes its events back: later ones count anew */
}

int lupd_nvml_sim_xids(struct lupd_xid *out, int max)
{
        int n = n_pending < max ? n_pending : max;

        memcpy(out, pending, sizeof(pending[0]) * (size_t)n);
        memmove(pending, pending + n, sizeof(pending[0]) * (size_t)(n_pending - n));
        n_pending -= n;
        return n;
}
