/* SPDX-License-Identifier: MIT */
/*
 * ADMIN DIAG (lupinectl diag, issue 18): the checks an operator runs when
 * something is wrong, each a result (pass, warn, fail), what was found and,
 * for anything but a pass, what to do. The GPUs come from the NVML
 * snapshot, the rest from this process: the checkpoint store is written
 * to, the TLS certificate read, the fd store and arena slots counted.
 */
#define LUP_LOG_CAT LUP_LOGC_ADMIN
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "nvml_codec.h"
#include "supervisor/internal.h"

static void add(struct json_object *arr, const char *check, const char *result, const char *fix, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void add(struct json_object *arr, const char *check, const char *result, const char *fix, const char *fmt, ...)
{
        struct json_object *o = json_object_new_object();
        char detail[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        json_object_object_add(o, "check", json_object_new_string(check));
        json_object_object_add(o, "result", json_object_new_string(result));
        json_object_object_add(o, "detail", json_object_new_string(detail));
        if (fix)
                json_object_object_add(o, "fix", json_object_new_string(fix));
        json_object_array_add(arr, o);
}

static uint64_t dev_num(struct lup_nvml_dev *d, unsigned k, bool *ok)
{
        const struct lup_nvml_val *v = lup_nvml_devval(d, k);
        *ok = v && v->present && v->ret == 0;
        return *ok ? v->num : 0;
}

static void gpu_checks(struct sup *s, struct json_object *arr)
{
        struct lup_nvml_snapshot *snap = sup_nvml_view(s);
        bool ok;

        if (!snap || snap->n_devices == 0) {
                add(arr, "the GPU answers", "fail",
                    "check the driver (nvidia-smi), then restart lupined; on a host without GPUs use --backend sim",
                    "NVML lists no GPU");
                return;
        }
        bool sim = snap->backend == LUP_BACKEND_SIM;
        for (uint32_t i = 0; i < snap->n_devices && i < LUP_MAX_DEVICES; i++) {
                struct lup_nvml_dev *d = &snap->dev[i];
                const struct lup_nvml_val *name = lup_nvml_devval(d, LUP_NVML_K_NAME);
                char what[64];
                snprintf(what, sizeof(what), "GPU %u", (unsigned)i);
                uint64_t t = dev_num(d, LUP_NVML_K_TEMP_GPU, &ok), slow;
                bool ok_slow;
                slow = dev_num(d, LUP_NVML_K_TEMP_SLOWDOWN, &ok_slow);
                add(arr, what, "pass", NULL, "%s answers%s, %llu C", name && name->present ? name->str : "?",
                    sim ? " (simulated)" : "", (unsigned long long)t);
                if (ok && ok_slow && t + 5 >= slow)
                        add(arr, "temperature", "warn", "check the cooling; lupined keeps serving",
                            "GPU %u at %llu C, slowdown at %llu C", (unsigned)i, (unsigned long long)t,
                            (unsigned long long)slow);
                uint64_t ecc = dev_num(d, LUP_NVML_K_ECC_CURRENT, &ok);
                if (ok && !ecc)
                        add(arr, "ECC", "warn", "nvidia-smi -e 1, then a reboot: memory errors go unnoticed",
                            "GPU %u: ECC is off", (unsigned)i);
                else if (ok)
                        add(arr, "ECC", "pass", NULL, "GPU %u: on", (unsigned)i);
                uint64_t unc = dev_num(d, LUP_NVML_K_ECC_UNCORR_VOLATILE, &ok);
                if (ok && unc)
                        add(arr, "uncorrectable ECC errors", "fail",
                            "drain this host (lupinectl drain) and reset the GPU (nvidia-smi -r)",
                            "GPU %u: %llu since the driver loaded", (unsigned)i, (unsigned long long)unc);
                uint64_t pend = dev_num(d, LUP_NVML_K_RETIRED_PENDING, &ok) + dev_num(d, LUP_NVML_K_REMAP_PENDING, &ok);
                if (pend)
                        add(arr, "pending page retirement", "warn",
                            "drain this host and reset the GPU so the retirement takes effect",
                            "GPU %u: %llu page(s) or row(s) pending", (unsigned)i, (unsigned long long)pend);
                uint64_t pm = dev_num(d, LUP_NVML_K_PERSISTENCE, &ok);
                if (ok && !pm)
                        add(arr, "persistence mode", "warn", "nvidia-smi -pm 1 (or the nvidia-persistenced service)",
                            "GPU %u: off: every worker start reinitialises the GPU", (unsigned)i);
                else if (ok)
                        add(arr, "persistence mode", "pass", NULL, "GPU %u: on", (unsigned)i);
        }
}

static void driver_check(struct sup *s, struct json_object *arr)
{
        if (s->cfg->backend == LUPD_BACKEND_SIM) {
                add(arr, "the driver loads", "pass", NULL, "--backend sim: the simulated driver");
                return;
        }
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                add(arr, "the driver loads", s->cfg->backend == LUPD_BACKEND_CUDA ? "fail" : "warn",
                    "install the NVIDIA driver (libcuda.so.1), or run with --backend sim", "%s", dlerror());
                return;
        }
        dlclose(h);
        add(arr, "the driver loads", "pass", NULL, "libcuda.so.1%s",
            s->backend_seen == LUP_BACKEND_SIM ? ", but the workers fell back to the simulator (no GPU answered)" : "");
}

static void store_check(struct sup *s, struct json_object *arr)
{
        const char *dir = s->cfg->checkpoint_dir;
        char probe[4200];
        struct statvfs fs;
        uint64_t need = 0;

        if (!dir[0]) {
                if (s->cfg->checkpoint_provider[0])
                        add(arr, "checkpoint store", "pass", NULL, "provider %s (its store is not probed)",
                            s->cfg->checkpoint_provider);
                else
                        add(arr, "checkpoint store", "warn", "--checkpoint-dir DIR (the packaged unit has one)",
                            "none: sessions end when lupined stops");
                return;
        }
        snprintf(probe, sizeof(probe), "%s/.lupinectl-diag-%d", dir, (int)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        int e = fd < 0 ? errno : 0;
        if (fd >= 0) {
                if (write(fd, "x", 1) != 1 || fsync(fd) < 0)
                        e = errno;
                close(fd);
                unlink(probe);
        }
        if (e) {
                add(arr, "checkpoint store writable", "fail",
                    "make the directory exist and be writable by lupined's user (systemd-tmpfiles --create)", "%s: %s",
                    dir, strerror(e));
                return;
        }
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                if (s->reg.s[i].state == LUPD_SESSION_LIVE)
                        need += s->reg.s[i].stats.mem;
        if (statvfs(dir, &fs) < 0) {
                add(arr, "checkpoint store space", "warn", NULL, "%s: statvfs: %s", dir, strerror(errno));
                return;
        }
        uint64_t avail = (uint64_t)fs.f_bavail * fs.f_frsize;
        add(arr, "checkpoint store space",
            avail < need       ? "fail"
            : avail < 2 * need ? "warn"
                               : "pass",
            avail < 2 * need ? "free space there, or --checkpoint-dir elsewhere: a drain writes every session" : NULL,
            "%s: %.1f GiB free, the sessions hold %.1f GiB", dir, (double)avail / 1073741824.0,
            (double)need / 1073741824.0);
        /* hosts sharing the store (docs/fleet.md) */
        struct stat st;
        snprintf(probe, sizeof(probe), "%s/.leases", dir);
        if (stat(probe, &st) == 0 && !S_ISDIR(st.st_mode))
                add(arr, "session leases", "fail",
                    "move it away: the directory provider keeps its leases there, and no session can run until it can "
                    "claim one",
                    "%s is not a directory", probe);
        else
                add(arr, "session leases", "pass", NULL,
                    "this host is %s (--host-id), leases of %d s under %s; periodic checkpoints %s; arena slots %s",
                    s->cfg->fleet.host_id, s->cfg->fleet.lease_ttl_s, probe,
                    s->cfg->fleet.checkpoint_interval_s ? "on" : "off",
                    s->reg.fleet_slots ? "agreed with the other hosts of the store" : "this host's own");
}

static void tls_check(struct sup *s, struct json_object *arr)
{
        const char *path = s->cfg->tls_cert;
        FILE *f;
        X509 *x;
        int days = 0, secs = 0;

        if (!path[0]) {
                add(arr, "TLS certificate", "pass", NULL, "no TLS (loopback and UNIX listeners only)");
                return;
        }
        f = fopen(path, "r");
        x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
        if (f)
                fclose(f);
        if (!x) {
                add(arr, "TLS certificate", "fail", "put a PEM certificate there (docs/tls.md)", "%s: cannot read it",
                    path);
                return;
        }
        if (!ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x))) {
                X509_free(x);
                add(arr, "TLS certificate", "warn", NULL, "%s: its expiry date cannot be read", path);
                return;
        }
        X509_free(x);
        if (days < 0 || (days == 0 && secs <= 0))
                add(arr, "TLS certificate", "fail", "renew it, then lupinectl upgrade (docs/tls.md, renewal)",
                    "%s expired %d day(s) ago", path, -days);
        else if (days < 14)
                add(arr, "TLS certificate", "warn", "renew it, then lupinectl upgrade (docs/tls.md, renewal)",
                    "%s expires in %d day(s)", path, days);
        else
                add(arr, "TLS certificate", "pass", NULL, "%s expires in %d days", path, days);
}

static void host_checks(struct sup *s, struct json_object *arr)
{
        struct utsname u;
        int usable = (int)LUP_ARENA_SLOTS - __builtin_popcountll(s->reg.unusable);

        uname(&u);
        add(arr, "io_uring", "pass", NULL, "in use (kernel %s)", u.release);
        add(arr, "arena slots",
            usable == 0                    ? "fail"
            : usable < s->reg.max_sessions ? "warn"
                                           : "pass",
            usable < s->reg.max_sessions ? "the log at start names the mappings in the way (docs/operations.md)" : NULL,
            "%d of %d usable, --max-sessions %d", usable, (int)LUP_ARENA_SLOTS, s->reg.max_sessions);
        if (sup_have_fd_store())
                add(arr, "fd store", "pass", NULL, "systemd keeps device memory across restarts (hot restarts)");
        else
                add(arr, "fd store", "warn", "run under systemd with FileDescriptorStoreMax= (the packaged unit)",
                    "none: a restart copies every session's memory to the checkpoint store and back");
}

void sup_admin_diag(struct sup *s, int idx)
{
        struct json_object *top = json_object_new_object(), *arr = json_object_new_array();
        size_t len;
        const char *t;

        add(arr, "the daemon answers", "pass", NULL, "lupined %s, pid %d", LUPINE_VERSION, (int)getpid());
        driver_check(s, arr);
        gpu_checks(s, arr);
        store_check(s, arr);
        tls_check(s, arr);
        host_checks(s, arr);
        json_object_object_add(top, "checks", arr);
        t = json_object_to_json_string_length(top, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!t || sup_admin_reply(&s->conns[idx], t, len) < 0)
                sup_conn_close(s, idx, 0, "ADMIN DIAG: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN DIAG answered");
        json_object_put(top);
}
