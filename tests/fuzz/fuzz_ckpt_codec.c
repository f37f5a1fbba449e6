/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the checkpoint codec (checkpoint/ckpt_codec.c), which a
 * restore runs on the manifest, events and replies objects it reads back
 * through a provider: bytes on a disk or a server that anyone with access
 * may have changed.
 *
 * Every input goes to each of the three decoders twice: as it is, and
 * "resealed" (its last 8 bytes replaced by the right hash for that kind),
 * so that mutations reach the parsers behind the hash check instead of all
 * dying at it. The seeds are real objects written by lupined
 * (corpus/fuzz_ckpt_codec/, made by ckpt_corpus.py). Beyond "no read past
 * the input" (ASan sees one byte too far) it checks what the worker relies
 * on:
 *   - the result is 0, -EBADMSG, -EPROTO (manifest only) or -ENOMEM, and a
 *     refusal comes with a reason;
 *   - an accepted manifest keeps every limit the header promises (counts,
 *     devices, names, piece counts against sizes);
 *   - encoding what was decoded gives back exactly the input: the format
 *     has one spelling per content, so what a restore accepts is what a
 *     save would write.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ckpt_codec.h"
#include "ckpt_graph.h"
#include "hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_bytes(const uint8_t *data, size_t size, uint8_t *again, size_t len)
{
        assert(len == size);
        assert(memcmp(again, data, size) == 0);
        free(again);
}

static void check_manifest(const struct lup_ckpt_manifest *m)
{
        assert(m->version >= LUP_CKPT_MANIFEST_VERSION_MIN && m->version <= LUP_CKPT_MANIFEST_VERSION);
        assert(m->mem && !(m->mem & ~(LUP_CKPT_MEM_DURABLE | LUP_CKPT_MEM_HOT)));
        assert(strlen(m->name) <= LUP_MAX_NAME);
        assert(m->slot < LUP_ARENA_SLOTS && m->n_devices <= LUP_MAX_DEVICES && m->n_ctxs <= LUP_MAX_CONTEXTS);
        for (uint32_t i = 0; i < m->n_ctxs; i++)
                assert(m->ctxs[i].device >= 0 && (uint32_t)m->ctxs[i].device < m->n_devices);
        for (uint32_t i = 0; i < m->n_slabs; i++)
                assert(m->slabs[i].device >= 0 && (uint32_t)m->slabs[i].device < m->n_devices);
        assert(m->n_allocs <= LUP_MAX_ALLOCS && m->n_chunks <= LUP_CKPT_MAX_CHUNKS);
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                const struct lup_ckpt_chunk *c = &m->chunks[i];
                uint64_t want = (m->mem & LUP_CKPT_MEM_DURABLE) ? (c->size + LUP_CKPT_PIECE - 1) / LUP_CKPT_PIECE : 0;
                assert(c->size <= LUP_ARENA_SIZE && c->n_pieces == want && (c->n_pieces == 0 || c->hashes));
        }
        assert(m->n_handles <= LUP_MAX_HANDLES && m->n_globals <= LUP_MAX_HANDLES);
        for (uint32_t i = 0; i < m->n_handles; i++)
                assert(strlen(m->handles[i].name) <= LUP_MAX_STR && m->handles[i].image_len <= LUP_MAX_BLOB);
        for (uint32_t i = 0; i < m->n_globals; i++)
                assert(strlen(m->globals[i].name) <= LUP_MAX_STR && m->globals[i].size >= 1 &&
                       m->globals[i].size <= LUP_MAX_BLOB);
        assert(m->n_settings <= LUP_CKPT_MAX_SETTINGS);
}

static void one_manifest(const uint8_t *data, size_t size)
{
        struct lup_ckpt_manifest m;
        const char *why = NULL;
        int rc = lup_ckpt_manifest_decode(data, size, &m, &why);
        assert(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -ENOMEM);
        if (rc < 0) {
                assert(why && *why);
                return;
        }
        assert(!why);
        check_manifest(&m);
        uint8_t *again = NULL;
        size_t len = 0;
        assert(lup_ckpt_manifest_encode(&m, &again, &len) == 0);
        same_bytes(data, size, again, len);
        lup_ckpt_manifest_free(&m);
}

static void one_events(const uint8_t *data, size_t size)
{
        struct lup_ckpt_event *v = NULL;
        uint32_t n = 0;
        const char *why = NULL;
        int rc = lup_ckpt_events_decode(data, size, &v, &n, &why);
        assert(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
        if (rc < 0) {
                assert(why && *why);
                return;
        }
        assert(n <= LUP_MAX_HANDLES && (n == 0 || v));
        uint8_t *again = NULL;
        size_t len = 0;
        assert(lup_ckpt_events_encode(v, n, &again, &len) == 0);
        same_bytes(data, size, again, len);
        free(v);
}

static void one_replies(const uint8_t *data, size_t size)
{
        struct lup_ckpt_replies r;
        const char *why = NULL;
        int rc = lup_ckpt_replies_decode(data, size, &r, &why);
        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0) {
                assert(why && *why);
                return;
        }
        uint64_t n = r.end - r.start;
        assert(r.end >= r.start && n <= size);
        assert(n == 0 || (r.data >= data && r.data + n <= data + size));
        uint8_t *again = NULL;
        size_t len = 0;
        assert(lup_ckpt_replies_encode(r.start, r.end, r.data, (size_t)n, NULL, 0, &again, &len) == 0);
        same_bytes(data, size, again, len);
}

static void one_graphs(const uint8_t *data, size_t size)
{
        struct lup_ckpt_graphs g;
        const char *why = NULL;
        int rc = lup_ckpt_graphs_decode(data, size, &g, &why);
        assert(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -ENOMEM);
        if (rc < 0) {
                assert(why != NULL);
                return;
        }
        assert(g.n_graphs <= LUP_CKPT_MAX_GRAPHS && g.n_caps <= LUP_CKPT_MAX_CAPTURES);
        for (uint32_t i = 0; i < g.n_graphs; i++) {
                const struct lup_ckpt_graph *x = &g.graphs[i];
                assert(x->role <= LUP_GRAPH_ROLE_CHILD && x->n_nodes <= LUP_CKPT_MAX_GRAPH_NODES);
                for (uint32_t j = 0; j < x->n_edges; j++)
                        assert(x->edges[j].from < x->n_nodes && x->edges[j].to < x->n_nodes);
                for (uint32_t j = 0; j < x->n_nodes; j++)
                        assert(x->nodes[j].type != LUP_GNODE_GRAPH || x->nodes[j].u.child < g.n_graphs);
        }
        uint8_t *again = NULL;
        size_t len = 0;
        assert(lup_ckpt_graphs_encode(&g, &again, &len) == 0);
        same_bytes(data, size, again, len);
        lup_ckpt_graphs_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const struct lup_sealed *const kinds[] = { &lup_ckpt_manifest_kind, &lup_ckpt_events_kind,
                                                          &lup_ckpt_replies_kind, &lup_ckpt_graphs_kind };
        static void (*const decode[])(const uint8_t *, size_t) = { one_manifest, one_events, one_replies, one_graphs };
        uint8_t *copy = malloc(size ? size : 1);

        assert(copy);
        for (size_t k = 0; k < 4; k++) {
                decode[k](data, size);
                if (size < 16)
                        continue;
                memcpy(copy, data, size);
                lup_put64(copy + size - 8, lup_hash64(copy, size - 8, kinds[k]->magic));
                decode[k](copy, size);
        }
        free(copy);
        return 0;
}
