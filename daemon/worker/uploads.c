/* SPDX-License-Identifier: MIT */
/*
 * The caps on uploaded-but-unused bytes (worker/uploads.h). The session's
 * own figure is s->obj.blob_bytes; the global one is the sum of every
 * slot's counter in the supervisor's accounting memfd (daemon/upload_acct.h),
 * mapped at the first upload. The global check adds first and looks after,
 * so two workers racing for the last bytes may both be refused, never both
 * let in.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include "worker/uploads.h"

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>

#include "config.h"
#include "log.h"
#include "upload_acct.h"
#include "worker/session.h"

#define MIB (1ull << 20)

static struct lupd_upload_acct *g_acct;
static bool acct_tried;

static struct lupd_upload_acct *acct_map(const struct lupw_session *s)
{
        void *p;

        if (acct_tried)
                return g_acct;
        acct_tried = true;
        if (!s->cfg || s->cfg->upload_acct_fd < 3) /* none (-1; 0 in a zeroed config: stdio is never it) */
                return NULL;
        p = mmap(NULL, sizeof(*g_acct), PROT_READ | PROT_WRITE, MAP_SHARED, s->cfg->upload_acct_fd, 0);
        if (p == MAP_FAILED) {
                lup_warn("session %s: cannot map the upload accounting (fd %d): %m; --upload-cap-total is not "
                         "enforced for this session",
                         s->name, s->cfg->upload_acct_fd);
                return NULL;
        }
        g_acct = p;
        return g_acct;
}

static _Atomic uint64_t *my_counter(const struct lupw_session *s)
{
        struct lupd_upload_acct *a = acct_map(s);

        return a && s->slot < LUP_ARENA_SLOTS ? &a->slot[s->slot] : NULL;
}

int lupw_upload_reserve(struct lupw_session *s, uint64_t n, char *why, size_t cap)
{
        /* no configuration (the fuzz harness): the protocol's bound only */
        uint64_t cap_s = s->cfg ? (uint64_t)s->cfg->upload_cap_session_mib * MIB : 0;
        uint64_t cap_t = s->cfg ? (uint64_t)s->cfg->upload_cap_total_mib * MIB : 0;
        _Atomic uint64_t *mine;

        if (s->obj.blob_bytes + n > LUP_MAX_BLOB_BYTES || (cap_s && s->obj.blob_bytes + n > cap_s)) {
                if (acct_map(s))
                        atomic_fetch_add(&g_acct->refused_session, 1);
                snprintf(why, cap,
                         "an upload of %llu bytes would hold %llu uploaded-but-unused bytes in this session, over "
                         "the cap of %llu (--upload-cap-session)",
                         (unsigned long long)n, (unsigned long long)(s->obj.blob_bytes + n),
                         (unsigned long long)(cap_s && cap_s < LUP_MAX_BLOB_BYTES ? cap_s : LUP_MAX_BLOB_BYTES));
                return -EDQUOT;
        }
        mine = cap_t ? my_counter(s) : NULL;
        if (mine) {
                atomic_fetch_add(mine, n);
                uint64_t total = lupd_upload_acct_total(g_acct);
                if (total > cap_t) {
                        atomic_fetch_sub(mine, n);
                        atomic_fetch_add(&g_acct->refused_total, 1);
                        snprintf(why, cap,
                                 "an upload of %llu bytes would hold %llu uploaded-but-unused bytes in all sessions, "
                                 "over the cap of %llu (--upload-cap-total)",
                                 (unsigned long long)n, (unsigned long long)total, (unsigned long long)cap_t);
                        return -EDQUOT;
                }
        }
        s->obj.blob_bytes += n;
        return 0;
}

void lupw_upload_unreserve(struct lupw_session *s, uint64_t n)
{
        _Atomic uint64_t *mine = s->cfg && s->cfg->upload_cap_total_mib ? my_counter(s) : NULL;

        s->obj.blob_bytes -= n;
        if (mine)
                atomic_fetch_sub(mine, n);
}
