/* SPDX-License-Identifier: MIT */
/*
 * INFO's JSON (docs/protocol.md, "ADMIN") from an NVML snapshot: the
 * supervisor answers ADMIN INFO with it, and lupinectl --server makes the
 * same from the snapshot a remote lupined sends a client.
 */
#include <json-c/json.h>

#include "admin.h"
#include "nvml_codec.h"

/* NVML value v of key k: a number or string, or null when NVML had none. */
static struct json_object *json_of(const struct lup_nvml_val *v, unsigned k)
{
        if (!v || !v->present || v->ret != 0)
                return NULL; /* json-c writes NULL as null */
        return lup_nvml_key_is_str(k) ? json_object_new_string(v->str) : json_object_new_int64((int64_t)v->num);
}

struct json_object *lup_admin_info_json(struct lup_nvml_snapshot *snap, const char *version)
{
        static const struct {
                const char *name;
                unsigned key;
        } keys[] = {
                { "name", LUP_NVML_K_NAME },
                { "uuid", LUP_NVML_K_UUID },
                { "serial", LUP_NVML_K_SERIAL },
                { "pci_bus_id", LUP_NVML_K_PCI_BUS_ID },
                { "memory_total", LUP_NVML_K_MEM_TOTAL },
                { "memory_used", LUP_NVML_K_MEM_USED },
                { "compute_capability_major", LUP_NVML_K_CC_MAJOR },
                { "compute_capability_minor", LUP_NVML_K_CC_MINOR },
                { "clock_sm_mhz", LUP_NVML_K_CLK_SM },
                { "clock_mem_mhz", LUP_NVML_K_CLK_MEM },
                { "max_clock_sm_mhz", LUP_NVML_K_MAXCLK_SM },
                { "max_clock_mem_mhz", LUP_NVML_K_MAXCLK_MEM },
                { "power_mw", LUP_NVML_K_POWER },
                { "power_limit_mw", LUP_NVML_K_POWER_LIMIT },
                { "temperature_c", LUP_NVML_K_TEMP_GPU },
                { "temperature_slowdown_c", LUP_NVML_K_TEMP_SLOWDOWN },
                { "utilization_gpu", LUP_NVML_K_UTIL_GPU },
                { "ecc_mode", LUP_NVML_K_ECC_CURRENT },
                { "ecc_uncorrected_volatile", LUP_NVML_K_ECC_UNCORR_VOLATILE },
                { "retired_pages_pending", LUP_NVML_K_RETIRED_PENDING },
                { "remapped_rows_pending", LUP_NVML_K_REMAP_PENDING },
                { "mig_mode", LUP_NVML_K_MIG_CURRENT },
                { "persistence_mode", LUP_NVML_K_PERSISTENCE },
                { "compute_mode", LUP_NVML_K_COMPUTE_MODE },
                { "pstate", LUP_NVML_K_PSTATE },
        };
        struct json_object *top = json_object_new_object(), *gpus = json_object_new_array();

        if (!top || !gpus) {
                json_object_put(top);
                json_object_put(gpus);
                return NULL;
        }
        json_object_object_add(top, "version", version ? json_object_new_string(version) : NULL);
        json_object_object_add(top, "backend",
                               json_object_new_string(snap->backend == LUP_BACKEND_SIM ? "sim" : "cuda"));
        json_object_object_add(top, "driver_version",
                               json_of(lup_nvml_sys(snap, LUP_NVML_K_DRIVER_VERSION), LUP_NVML_K_DRIVER_VERSION));
        json_object_object_add(top, "nvml_version",
                               json_of(lup_nvml_sys(snap, LUP_NVML_K_NVML_VERSION), LUP_NVML_K_NVML_VERSION));
        json_object_object_add(top, "cuda_version",
                               json_of(lup_nvml_sys(snap, LUP_NVML_K_CUDA_VERSION), LUP_NVML_K_CUDA_VERSION));
        for (uint32_t d = 0; d < snap->n_devices && d < LUP_MAX_DEVICES; d++) {
                struct json_object *g = json_object_new_object();
                json_object_object_add(g, "index", json_object_new_int((int)d));
                for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                        json_object_object_add(g, keys[k].name,
                                               json_of(lup_nvml_devval(&snap->dev[d], keys[k].key), keys[k].key));
                json_object_array_add(gpus, g);
        }
        json_object_object_add(top, "gpus", gpus);
        return top;
}
