/* SPDX-License-Identifier: MIT */
/*
 * A minimal lupine checkpoint provider, as documentation by example
 * (docs/providers.md walks through it).
 *
 * It keeps every checkpoint in memory, per instance: nothing survives the
 * process, so it is useful for tests and as a skeleton, not for real
 * checkpoints. What it does show is everything the ABI asks of a provider:
 *
 *  - the one exported symbol, lupine_checkpoint_provider_v1(), returning a
 *    static table stamped with LUPINE_CHECKPOINT_ABI_VERSION and its size;
 *  - saves that stay invisible until commit, and a commit that replaces the
 *    older epoch in one step (here: one pointer swap; on a real store: one
 *    rename, one conditional PUT, one manifest write, ...);
 *  - a failed or aborted save leaving the older epoch untouched;
 *  - a limit on what a caller can grow, failing with -ENOSPC;
 *  - errors as negative errno values, described through last_error;
 *  - no global state: everything hangs off the instance;
 *  - ABI version 2's capabilities: save_write_at and load_read may run on
 *    several threads at once. Each write copies into its own extent
 *    outside any lock and then links it in under the save's lock; a commit
 *    sorts the extents and checks that they tile each object; a read only
 *    looks, so it needs no lock at all;
 *  - optionally (config "MIB,reserve"), memory reserved when it is opened
 *    (by the first instance open in a process; the others have none):
 *    a pool of blocks, touched up front, that large writes are copied
 *    into. Page faults then cost nothing during a save, which is how the
 *    benchmarks measure lupine's own checkpoint path to host memory
 *    (tests/bench/ckpt_bench.py --provider example);
 *  - ABI version 3's direct writes, with that pool: the pool is the
 *    region, save_direct_get hands out a block, and the daemon has the GPU
 *    copy into it, so no CPU touches the bytes. A commit refuses while a
 *    block handed out is not yet reported done;
 *  - ABI version 4's session leases (example_lease.c): claim, renew,
 *    release and a fenced commit, each one atomic step on a lease table
 *    that processes forked after open share;
 *  - ABI version 5's references: a save names older committed epochs it
 *    refers to (save_refer), and its commit keeps exactly those besides
 *    the new one. The newest epoch holds a reference on each of its bases,
 *    so they live as long as it does; a load finds them by their exact
 *    epoch, and the next commit drops whichever it does not name.
 *
 * It includes nothing of lupine but the public header: a provider builds
 * against abi/lupine/checkpoint_provider.h alone.
 *
 * Build: cc -shared -fPIC -fvisibility=hidden -I abi example_provider.c
 *        example_lease.c -Wl,--version-script=provider.map -o libexample.so
 */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "example_internal.h"
#include "lupine/checkpoint_provider.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_SAVE_BYTES (1ull << 30) /* per save by default; more fails with -ENOSPC */
#define POOL_BLOCK (4ull << 20)     /* a reserved pool hands out blocks of this size ... */
#define POOL_MIN_WRITE (2ull << 20) /* ... to writes at least this large; smaller ones use malloc */

/* Memory reserved up front: `n` blocks of POOL_BLOCK at `base`, the free
 * ones' indices on a stack. */
struct pool {
        unsigned char *base;
        size_t n;
        size_t *free_idx, n_free;
        pthread_mutex_t mu;
};

/* One write's bytes. */
struct extent {
        uint64_t off;
        size_t len;
        unsigned char *data;
};

/* An object is the extents written to it; after commit they are sorted by
 * offset and tile [0, len) exactly. */
struct object {
        char *name;
        struct extent *ext;
        size_t n_ext, cap_ext;
        uint64_t len; /* the end of the highest extent */
        struct object *next;
};

struct lupine_ckpt_load {
        struct lupine_ckpt_instance *inst;
        struct checkpoint *ckpt;
};

int ex_fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...)
{
        va_list ap;

        pthread_mutex_lock(&inst->err_mu);
        va_start(ap, fmt);
        vsnprintf(inst->err, sizeof(inst->err), fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&inst->err_mu);
        return err;
}

/* The header's name rules. A provider may rely on them; checking is cheap. */
bool ex_valid_session(const char *s)
{
        size_t n = s ? strnlen(s, 129) : 0;

        if (n == 0 || n > 128)
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static bool valid_object(const char *s)
{
        size_t n = s ? strnlen(s, 256) : 0;

        if (n == 0 || n > 255 || strstr(s, "..") || s[0] == '/')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") == n;
}

/* ---- the reserved pool */

static struct pool *pool_reserve(unsigned long long bytes)
{
        struct pool *p = calloc(1, sizeof(*p));
        size_t n = (size_t)(bytes / POOL_BLOCK);

        if (!p || n == 0 || !(p->free_idx = malloc(n * sizeof(*p->free_idx)))) {
                free(p);
                return NULL;
        }
        p->base = mmap(NULL, n * POOL_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p->base == MAP_FAILED) {
                free(p->free_idx);
                free(p);
                return NULL;
        }
        madvise(p->base, n * POOL_BLOCK, MADV_HUGEPAGE); /* fewer faults and TLB misses, where allowed */
        for (size_t i = 0; i < n * POOL_BLOCK; i += 4096)
                p->base[i] = 0; /* fault every page in now, not during a save */
        for (size_t i = 0; i < n; i++)
                p->free_idx[i] = n - 1 - i;
        p->n = p->n_free = n;
        pthread_mutex_init(&p->mu, NULL);
        return p;
}

static void pool_release(struct pool *p)
{
        if (!p)
                return;
        munmap(p->base, p->n * POOL_BLOCK);
        pthread_mutex_destroy(&p->mu);
        free(p->free_idx);
        free(p);
}

/* A free block of the pool, or NULL when none is left. */
static unsigned char *pool_take(struct pool *p)
{
        unsigned char *b = NULL;

        pthread_mutex_lock(&p->mu);
        if (p->n_free > 0)
                b = p->base + p->free_idx[--p->n_free] * POOL_BLOCK;
        pthread_mutex_unlock(&p->mu);
        return b;
}

/* Room for len bytes: a pool block for a large write when one is free,
 * else malloc. */
static unsigned char *data_alloc(struct pool *p, size_t len)
{
        unsigned char *b = p && len >= POOL_MIN_WRITE && len <= POOL_BLOCK ? pool_take(p) : NULL;

        return b ? b : malloc(len ? len : 1);
}

static void data_free(struct pool *p, unsigned char *b)
{
        if (p && b >= p->base && b < p->base + p->n * POOL_BLOCK) {
                pthread_mutex_lock(&p->mu);
                p->free_idx[p->n_free++] = (size_t)(b - p->base) / POOL_BLOCK;
                pthread_mutex_unlock(&p->mu);
                return;
        }
        free(b);
}

static void checkpoint_unref(struct checkpoint *c);

/* Gives up c's references on the older epochs it refers to. */
static void drop_bases(struct checkpoint *c)
{
        while (c->n_bases > 0)
                checkpoint_unref(c->bases[--c->n_bases]);
}

static void checkpoint_unref(struct checkpoint *c)
{
        if (!c || --c->refs > 0)
                return;
        drop_bases(c);
        while (c->objects) {
                struct object *o = c->objects;
                c->objects = o->next;
                for (size_t i = 0; i < o->n_ext; i++)
                        data_free(c->pool, o->ext[i].data);
                free(o->ext);
                free(o->name);
                free(o);
        }
        free(c);
}

static struct checkpoint **find_committed(struct lupine_ckpt_instance *inst, const char *session)
{
        struct checkpoint **pp = &inst->committed;

        while (*pp && strcmp((*pp)->session, session) != 0)
                pp = &(*pp)->next;
        return pp;
}

static struct checkpoint *find_base(const struct checkpoint *c, uint64_t epoch)
{
        for (size_t i = 0; i < c->n_bases; i++)
                if (c->bases[i]->epoch == epoch)
                        return c->bases[i];
        return NULL;
}

/* Committed epoch `epoch` of the session whose newest epoch is `newest`:
 * the newest itself or one it keeps, else NULL. */
static struct checkpoint *find_epoch(struct checkpoint *newest, uint64_t epoch)
{
        return newest && newest->epoch != epoch ? find_base(newest, epoch) : newest;
}

static struct object *find_object(struct checkpoint *c, const char *name)
{
        for (struct object *o = c->objects; o; o = o->next)
                if (strcmp(o->name, name) == 0)
                        return o;
        return NULL;
}

/* ---- instance */

static atomic_int pools_open; /* instances of this process with a reserved pool: 0 or 1 */

static int ex_open(const char *config, struct lupine_ckpt_instance **ret)
{
        /* memory needs no address; config may give the per-save limit in
         * MiB (the benchmarks use that to hold large sessions), and
         * ",reserve" after it reserves that much up front */
        struct lupine_ckpt_instance *inst = calloc(1, sizeof(*inst));
        char *end;

        if (!inst)
                return -ENOMEM;
        pthread_mutex_init(&inst->err_mu, NULL);
        inst->max_save = MAX_SAVE_BYTES;
        if (!(inst->leases = ex_leases_new())) {
                pthread_mutex_destroy(&inst->err_mu);
                free(inst);
                return -ENOMEM;
        }
        if (config && *config) {
                unsigned long long mib = strtoull(config, &end, 10);
                bool reserve = strcmp(end, ",reserve") == 0;
                if ((*end && !reserve) || mib == 0 || mib > (1ull << 24) || (reserve && (mib << 20) < POOL_BLOCK)) {
                        ex_leases_free(inst->leases);
                        pthread_mutex_destroy(&inst->err_mu);
                        free(inst);
                        return -EINVAL;
                }
                inst->max_save = mib << 20;
                /* One pool per process: lupined's worker opens a second
                 * instance only to renew its lease, which never saves,
                 * and reserving (and touching) the memory twice would
                 * double what a session costs. */
                if (reserve && atomic_fetch_add(&pools_open, 1) != 0) {
                        atomic_fetch_sub(&pools_open, 1);
                        reserve = false;
                }
                if (reserve && !(inst->pool = pool_reserve(inst->max_save))) {
                        atomic_fetch_sub(&pools_open, 1);
                        ex_leases_free(inst->leases);
                        pthread_mutex_destroy(&inst->err_mu);
                        free(inst);
                        return -ENOMEM;
                }
        }
        *ret = inst;
        return 0;
}

static void ex_close(struct lupine_ckpt_instance *inst)
{
        if (!inst)
                return;
        while (inst->committed) {
                struct checkpoint *c = inst->committed;
                inst->committed = c->next;
                checkpoint_unref(c);
        }
        /* a load still open would keep its checkpoint, and so its blocks:
         * the daemon ends every load before it closes */
        if (inst->pool)
                atomic_fetch_sub(&pools_open, 1);
        pool_release(inst->pool);
        ex_leases_free(inst->leases);
        pthread_mutex_destroy(&inst->err_mu);
        free(inst);
}

static const char *ex_last_error(struct lupine_ckpt_instance *inst)
{
        return inst->err;
}

/* ---- saving */

static int ex_save_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                         struct lupine_ckpt_save **ret)
{
        struct checkpoint *old;
        struct lupine_ckpt_save *save;

        inst->err[0] = '\0';
        if (!ex_valid_session(session) || epoch == 0)
                return ex_fail(inst, -EINVAL, "invalid session name or epoch 0");
        old = *find_committed(inst, session);
        if (old && old->epoch >= epoch)
                return ex_fail(inst, -EEXIST, "session %s already has epoch %llu", session,
                               (unsigned long long)old->epoch);
        save = calloc(1, sizeof(*save));
        if (!save || !(save->ckpt = calloc(1, sizeof(*save->ckpt)))) {
                free(save);
                return ex_fail(inst, -ENOMEM, "out of memory");
        }
        save->inst = inst;
        save->ckpt->pool = inst->pool;
        pthread_mutex_init(&save->mu, NULL);
        snprintf(save->ckpt->session, sizeof(save->ckpt->session), "%s", session);
        save->ckpt->epoch = epoch;
        save->ckpt->refs = 1;
        *ret = save;
        return 0;
}

/* Links `len` bytes (already copied into `data`, which it then owns) in
 * at `off`, or at the object's end when append; called with save->mu. */
static int add_extent(struct lupine_ckpt_save *save, const char *name, bool append, uint64_t off,
                      unsigned char *data, size_t len)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct checkpoint *c = save->ckpt;
        struct object *o;

        if (len > inst->max_save - c->bytes)
                return ex_fail(inst, -ENOSPC, "a save holds at most %llu bytes", (unsigned long long)inst->max_save);
        o = find_object(c, name);
        if (!o) {
                o = calloc(1, sizeof(*o));
                if (!o || !(o->name = strdup(name))) {
                        free(o);
                        return ex_fail(inst, -ENOMEM, "out of memory");
                }
                o->next = c->objects;
                c->objects = o;
        }
        if (append)
                off = o->len;
        if (off > UINT64_MAX - len)
                return ex_fail(inst, -EFBIG, "object %s would pass 2^64 bytes", name);
        if (len == 0)
                return 0;
        if (o->n_ext == o->cap_ext) {
                size_t cap = o->cap_ext ? o->cap_ext * 2 : 16;
                struct extent *n = realloc(o->ext, cap * sizeof(*n));
                if (!n)
                        return ex_fail(inst, -ENOMEM, "out of memory");
                o->ext = n;
                o->cap_ext = cap;
        }
        o->ext[o->n_ext++] = (struct extent){ .off = off, .len = len, .data = data };
        if (off + len > o->len)
                o->len = off + len;
        c->bytes += len;
        return 0;
}

static int write_common(struct lupine_ckpt_save *save, const char *name, bool append, uint64_t off,
                        const void *data, size_t len)
{
        struct lupine_ckpt_instance *inst = save->inst;
        unsigned char *copy = NULL;
        int r;

        if (!valid_object(name) || (len && !data))
                return ex_fail(inst, -EINVAL, "invalid object name or NULL data");
        if (len > inst->max_save)
                return ex_fail(inst, -ENOSPC, "a save holds at most %llu bytes", (unsigned long long)inst->max_save);
        /* The caller's buffer is valid only during this call: copy it,
         * outside the lock, so that concurrent writers copy in parallel. */
        if (len) {
                copy = data_alloc(inst->pool, len);
                if (!copy)
                        return ex_fail(inst, -ENOMEM, "out of memory");
                memcpy(copy, data, len);
        }
        pthread_mutex_lock(&save->mu);
        r = add_extent(save, name, append, off, copy, len);
        pthread_mutex_unlock(&save->mu);
        if (r < 0)
                data_free(inst->pool, copy);
        return r;
}

static int ex_save_write(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len)
{
        save->inst->err[0] = '\0';
        return write_common(save, name, true, 0, data, len);
}

/* Version 2: may run on several threads at once (LUPINE_CKPT_CAP_CONCURRENT_WRITE). */
static int ex_save_write_at(struct lupine_ckpt_save *save, const char *name, uint64_t offset, const void *data,
                            size_t len)
{
        return write_common(save, name, false, offset, data, len);
}

/* ---- version 3: direct writes into the reserved pool */

static int ex_direct_region(struct lupine_ckpt_instance *inst, void **ret_base, size_t *ret_len)
{
        if (!inst->pool)
                return ex_fail(inst, -ENOTSUP, "no reserved pool (config \"MIB,reserve\")");
        *ret_base = inst->pool->base;
        *ret_len = inst->pool->n * POOL_BLOCK;
        return 0;
}

/* A pool block becomes the extent right away; the daemon fills it. */
static int ex_save_direct_get(struct lupine_ckpt_save *save, const char *name, uint64_t offset, size_t len,
                              void **ret_ptr)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct pool *p = inst->pool;
        unsigned char *b;
        int r;

        if (!valid_object(name) || len == 0 || !ret_ptr)
                return ex_fail(inst, -EINVAL, "invalid object name, length 0 or NULL output");
        if (!p || len > POOL_BLOCK || !(b = pool_take(p)))
                return -ENOBUFS; /* no room in place: save_write_at takes this range */
        pthread_mutex_lock(&save->mu);
        r = add_extent(save, name, false, offset, b, len);
        if (r == 0)
                save->direct_pending++;
        pthread_mutex_unlock(&save->mu);
        if (r < 0) {
                data_free(p, b);
                return r;
        }
        *ret_ptr = b;
        return 0;
}

static int ex_save_direct_done(struct lupine_ckpt_save *save, const char *name, uint64_t offset, size_t len)
{
        int r = 0;

        (void)name;
        (void)offset;
        (void)len;
        pthread_mutex_lock(&save->mu);
        if (save->direct_pending == 0)
                r = ex_fail(save->inst, -EINVAL, "save_direct_done without a save_direct_get");
        else
                save->direct_pending--;
        pthread_mutex_unlock(&save->mu);
        return r;
}

/* ---- version 5: references to older epochs */

/* The save takes a reference on the base at once: its commit hands it on
 * to the new epoch, its abort gives it back. */
static int ex_save_refer(struct lupine_ckpt_save *save, uint64_t epoch)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct checkpoint *c = save->ckpt, *base;

        inst->err[0] = '\0';
        if (epoch == 0 || epoch >= c->epoch)
                return ex_fail(inst, -EINVAL, "save_refer: epoch %llu is not older than the save's %llu",
                               (unsigned long long)epoch, (unsigned long long)c->epoch);
        if (find_base(c, epoch))
                return 0;
        if (c->n_bases == LUPINE_CKPT_MAX_REFS)
                return ex_fail(inst, -E2BIG, "a save refers to at most %u epochs", LUPINE_CKPT_MAX_REFS);
        base = find_epoch(*find_committed(inst, c->session), epoch);
        if (!base)
                return ex_fail(inst, -ENOENT, "session %s has no committed epoch %llu to refer to", c->session,
                               (unsigned long long)epoch);
        base->refs++;
        c->bases[c->n_bases++] = base;
        return 0;
}

/* A base removed since save_refer (remove, or a newer commit) is not to be
 * brought back: only the bases still committed beside `newest` stay. */
static void keep_committed_bases(struct checkpoint *c, struct checkpoint *newest)
{
        size_t n = 0;

        for (size_t i = 0; i < c->n_bases; i++) {
                if (find_epoch(newest, c->bases[i]->epoch) == c->bases[i])
                        c->bases[n++] = c->bases[i];
                else
                        checkpoint_unref(c->bases[i]);
        }
        c->n_bases = n;
}

static void ex_save_abort(struct lupine_ckpt_save *save);

static int cmp_extent(const void *a, const void *b)
{
        const struct extent *x = a, *y = b;

        return x->off < y->off ? -1 : x->off > y->off;
}

/* Sorts each object's extents and checks they tile it without holes or
 * overlaps (the daemon promises that; a provider checks what is cheap). */
static int seal(struct lupine_ckpt_save *save)
{
        for (struct object *o = save->ckpt->objects; o; o = o->next) {
                uint64_t at = 0;
                qsort(o->ext, o->n_ext, sizeof(*o->ext), cmp_extent);
                for (size_t i = 0; i < o->n_ext; i++) {
                        if (o->ext[i].off != at)
                                return ex_fail(save->inst, -EINVAL, "object %s has a %s at offset %llu", o->name,
                                               o->ext[i].off > at ? "hole" : "overlap", (unsigned long long)at);
                        at += o->ext[i].len;
                }
        }
        return 0;
}

static int ex_save_commit(struct lupine_ckpt_save *save)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct checkpoint **pp = find_committed(inst, save->ckpt->session);
        struct checkpoint *old = *pp;
        int r;

        inst->err[0] = '\0';
        r = save->direct_pending ? ex_fail(inst, -EINVAL, "%zu direct write(s) not reported done", save->direct_pending)
                                 : seal(save);
        if (r < 0) {
                ex_save_abort(save);
                return r;
        }
        /* fenced: the lease check and the swap below are one step */
        if (save->fenced &&
            ex_leases_hold(inst->leases, save->ckpt->session, save->fence_owner, save->fence_token) < 0) {
                ex_fail(inst, -ESTALE, "session %s: the lease left %s's token %llu", save->ckpt->session,
                        save->fence_owner, (unsigned long long)save->fence_token);
                ex_save_abort(save);
                return -ESTALE;
        }
        keep_committed_bases(save->ckpt, old);
        /* The atomic step: the new epoch takes the old one's place. */
        save->ckpt->next = old ? old->next : inst->committed;
        if (old)
                *pp = save->ckpt;
        else
                inst->committed = save->ckpt;
        if (save->fenced)
                ex_leases_unlock(inst->leases);
        /* Only now that the new epoch is in place do the older ones go: the
         * old newest gives up its bases (the new epoch holds references of
         * its own on those it keeps), then itself, unless the new epoch
         * refers to it. */
        if (old)
                drop_bases(old);
        checkpoint_unref(old);
        pthread_mutex_destroy(&save->mu);
        free(save);
        return 0;
}

static void ex_save_abort(struct lupine_ckpt_save *save)
{
        checkpoint_unref(save->ckpt);
        pthread_mutex_destroy(&save->mu);
        free(save);
}

/* ---- loading */

static int ex_load_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                         struct lupine_ckpt_load **ret, uint64_t *ret_epoch)
{
        struct checkpoint *c;
        struct lupine_ckpt_load *load;

        inst->err[0] = '\0';
        if (!ex_valid_session(session))
                return ex_fail(inst, -EINVAL, "invalid session name");
        c = *find_committed(inst, session);
        if (epoch != 0)
                c = find_epoch(c, epoch); /* the newest, or an older one it keeps */
        if (!c)
                return ex_fail(inst, -ENOENT, "no such checkpoint of session %s", session);
        load = calloc(1, sizeof(*load));
        if (!load)
                return ex_fail(inst, -ENOMEM, "out of memory");
        load->inst = inst;
        load->ckpt = c;
        c->refs++;
        *ret = load;
        if (ret_epoch)
                *ret_epoch = c->epoch;
        return 0;
}

static int ex_load_size(struct lupine_ckpt_load *load, const char *name, uint64_t *ret_size)
{
        struct object *o;

        /* no clearing of err: this may run concurrently (CAP_CONCURRENT_READ) */
        if (!valid_object(name))
                return ex_fail(load->inst, -EINVAL, "invalid object name");
        o = find_object(load->ckpt, name);
        if (!o)
                return ex_fail(load->inst, -ENOENT, "no object %s", name);
        *ret_size = o->len;
        return 0;
}

/* Reads only: several threads may run it at once (CAP_CONCURRENT_READ). */
static int64_t ex_load_read(struct lupine_ckpt_load *load, const char *name, uint64_t offset, void *buf, size_t len)
{
        struct object *o;
        size_t lo, hi, done = 0;

        if (!valid_object(name))
                return ex_fail(load->inst, -EINVAL, "invalid object name");
        o = find_object(load->ckpt, name);
        if (!o)
                return ex_fail(load->inst, -ENOENT, "no object %s", name);
        if (offset >= o->len)
                return 0;
        if (len > o->len - offset)
                len = (size_t)(o->len - offset);
        if (len > INT64_MAX)
                len = INT64_MAX;
        /* the last extent starting at or before offset */
        lo = 0;
        hi = o->n_ext;
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (o->ext[mid].off <= offset)
                        lo = mid;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < o->n_ext && done < len; i++) {
                const struct extent *e = &o->ext[i];
                uint64_t in = offset + done - e->off;
                size_t k = e->len - in < len - done ? (size_t)(e->len - in) : len - done;
                memcpy((unsigned char *)buf + done, e->data + in, k);
                done += k;
        }
        return (int64_t)done;
}

static void ex_load_end(struct lupine_ckpt_load *load)
{
        checkpoint_unref(load->ckpt);
        free(load);
}

/* ---- listing and deleting */

static int ex_list(struct lupine_ckpt_instance *inst, int (*fn)(const struct lupine_ckpt_info *info, void *userdata),
                   void *userdata)
{
        inst->err[0] = '\0';
        for (struct checkpoint *c = inst->committed, *next; c; c = next) {
                struct lupine_ckpt_info info = { .epoch = c->epoch, .bytes = c->bytes };
                next = c->next; /* fn may remove this session */
                snprintf(info.session, sizeof(info.session), "%s", c->session);
                int r = fn(&info, userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}

static int ex_remove(struct lupine_ckpt_instance *inst, const char *session)
{
        struct checkpoint **pp, *c;

        inst->err[0] = '\0';
        if (!ex_valid_session(session))
                return ex_fail(inst, -EINVAL, "invalid session name");
        pp = find_committed(inst, session);
        c = *pp;
        if (!c)
                return ex_fail(inst, -ENOENT, "no checkpoint of session %s", session);
        *pp = c->next;
        drop_bases(c); /* the kept epochs go with it, even while a load holds c */
        checkpoint_unref(c);
        return 0;
}

/* ---- the one exported symbol */

EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void);

static const struct lupine_checkpoint_provider example_provider = {
        .abi_version = LUPINE_CHECKPOINT_ABI_VERSION,
        .struct_size = sizeof(struct lupine_checkpoint_provider),
        .name = "example-memory",
        .open = ex_open,
        .close = ex_close,
        .last_error = ex_last_error,
        .save_begin = ex_save_begin,
        .save_write = ex_save_write,
        .save_commit = ex_save_commit,
        .save_abort = ex_save_abort,
        .load_begin = ex_load_begin,
        .load_size = ex_load_size,
        .load_read = ex_load_read,
        .load_end = ex_load_end,
        .list = ex_list,
        .remove = ex_remove,
        .caps = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_CONCURRENT_READ | LUPINE_CKPT_CAP_DIRECT_WRITE |
                LUPINE_CKPT_CAP_LEASES | LUPINE_CKPT_CAP_REFER,
        .save_write_at = ex_save_write_at,
        .direct_region = ex_direct_region,
        .save_direct_get = ex_save_direct_get,
        .save_direct_done = ex_save_direct_done,
        .lease_claim = ex_lease_claim,
        .lease_renew = ex_lease_renew,
        .lease_release = ex_lease_release,
        .lease_read = ex_lease_read,
        .save_fence = ex_save_fence,
        .save_refer = ex_save_refer,
};

EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void)
{
        return &example_provider;
}
