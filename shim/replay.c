/* SPDX-License-Identifier: MIT */
/* The replay buffer: see replay.h. */
#include "replay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A record is this header, then the frame bytes, padded to 8. */
struct replay_rec {
        uint64_t seq;
        uint32_t len;
        uint32_t reserved;
};
#define REC_HDR sizeof(struct replay_rec)

struct replay_chunk {
        struct replay_chunk *next;
        size_t cap; /* bytes of data[] */
        size_t rd;  /* the oldest record still held starts here */
        size_t wr;  /* the next record goes here */
        uint8_t data[];
};

static size_t rec_size(size_t len)
{
        return REC_HDR + ((len + 7u) & ~(size_t)7u);
}

static struct replay_rec rec_at(const struct replay_chunk *c, size_t off)
{
        struct replay_rec h;
        memcpy(&h, c->data + off, sizeof(h));
        return h;
}

int replay_init(struct replay *r, size_t max_bytes, size_t chunk_size)
{
        if (max_bytes == 0)
                return -EINVAL;
        *r = (struct replay){
                .max_bytes = max_bytes,
                .chunk_size = chunk_size ? chunk_size : REPLAY_DEFAULT_CHUNK,
        };
        return 0;
}

/* Chunks are mapped, not malloc'ed: a chunk is reused for as long as the
 * buffer lives (the memory is touched once, not once per use) and spare
 * chunks can be offered back to the kernel without unmapping them. */
static void unmap_chunk(struct replay_chunk *c)
{
        munmap(c, sizeof(*c) + c->cap);
}

static void free_list(struct replay_chunk *c)
{
        while (c) {
                struct replay_chunk *next = c->next;
                unmap_chunk(c);
                c = next;
        }
}

void replay_free(struct replay *r)
{
        if (!r)
                return;
        free_list(r->head);
        free_list(r->spare);
        r->head = r->tail = r->spare = NULL;
        r->n_spare = 0;
        r->bytes = r->count = 0;
}

bool replay_fits(const struct replay *r, size_t n)
{
        return r->count == 0 || (n <= r->max_bytes && r->bytes <= r->max_bytes - n);
}

/* An emptied ordinary chunk goes to the spare list, to be filled again
 * without page faults; beyond REPLAY_HOT_SPARE spares its pages are marked
 * MADV_FREE, so the kernel may take them back under memory pressure (if it
 * has not, reusing them costs nothing). An oversized chunk is unmapped. */
static void release_chunk(struct replay *r, struct replay_chunk *c)
{
        if (c->cap != r->chunk_size) {
                unmap_chunk(c);
                return;
        }
        if (r->n_spare >= REPLAY_HOT_SPARE) {
                long page = sysconf(_SC_PAGESIZE);
                size_t skip = page > 0 ? (size_t)page : 4096; /* the first page holds the chunk header */
                if (sizeof(*c) + c->cap > skip)
                        (void)madvise((uint8_t *)c + skip, sizeof(*c) + c->cap - skip, MADV_FREE);
        }
        c->next = r->spare;
        r->spare = c;
        r->n_spare++;
}

static struct replay_chunk *get_chunk(struct replay *r, size_t need)
{
        struct replay_chunk *c;
        if (need <= r->chunk_size && r->spare) {
                c = r->spare;
                r->spare = c->next;
                r->n_spare--;
        } else {
                size_t cap = need <= r->chunk_size ? r->chunk_size : need;
                void *p = mmap(NULL, sizeof(*c) + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                if (p == MAP_FAILED)
                        return NULL;
                c = p;
                c->cap = cap;
        }
        c->next = NULL;
        c->rd = c->wr = 0;
        return c;
}

int replay_append(struct replay *r, uint64_t seq, const struct iovec *iov, int iovcnt, const uint8_t **ret_frame)
{
        size_t len = 0;
        for (int i = 0; i < iovcnt; i++)
                len += iov[i].iov_len;
        if (seq <= r->last_seq || len == 0 || len > UINT32_MAX)
                return -EINVAL;

        size_t need = rec_size(len);
        struct replay_chunk *c = r->tail;
        if (c && r->count == 0 && c->cap - c->wr < need) {
                /* an empty chunk too small for this frame: never leave an
                 * empty chunk in front of a full one */
                release_chunk(r, c);
                r->head = r->tail = c = NULL;
        }
        if (!c || c->cap - c->wr < need) {
                c = get_chunk(r, need);
                if (!c)
                        return -ENOMEM;
                if (r->tail)
                        r->tail->next = c;
                else
                        r->head = c;
                r->tail = c;
        }
        struct replay_rec h = { .seq = seq, .len = (uint32_t)len };
        uint8_t *p = c->data + c->wr;
        memcpy(p, &h, sizeof(h));
        p += REC_HDR;
        for (int i = 0; i < iovcnt; i++) {
                if (iov[i].iov_len)
                        memcpy(p, iov[i].iov_base, iov[i].iov_len);
                p += iov[i].iov_len;
        }
        if (ret_frame)
                *ret_frame = c->data + c->wr + REC_HDR;
        c->wr += need;
        r->bytes += len;
        r->count++;
        r->last_seq = seq;
        return 0;
}

size_t replay_ack(struct replay *r, uint64_t n)
{
        size_t dropped = 0;
        struct replay_chunk *c;
        while ((c = r->head)) {
                if (c->rd == c->wr) {
                        if (c == r->tail) {
                                /* the only chunk: keep it and start over at its front */
                                c->rd = c->wr = 0;
                                break;
                        }
                        r->head = c->next;
                        release_chunk(r, c);
                        continue;
                }
                struct replay_rec h = rec_at(c, c->rd);
                if (h.seq > n)
                        break;
                c->rd += rec_size(h.len);
                r->bytes -= h.len;
                r->count--;
                dropped++;
        }
        return dropped;
}

uint64_t replay_first_seq(const struct replay *r)
{
        if (r->count == 0)
                return 0;
        return rec_at(r->head, r->head->rd).seq;
}

unsigned replay_chunks(const struct replay *r)
{
        unsigned n = r->n_spare;
        for (const struct replay_chunk *c = r->head; c; c = c->next)
                n++;
        return n;
}

int replay_for_each_after(const struct replay *r, uint64_t n, replay_fn fn, void *userdata)
{
        int visited = 0;
        for (const struct replay_chunk *c = r->head; c; c = c->next) {
                for (size_t off = c->rd; off < c->wr;) {
                        struct replay_rec h = rec_at(c, off);
                        if (h.seq > n) {
                                int rc = fn(h.seq, c->data + off + REC_HDR, h.len, userdata);
                                if (rc < 0)
                                        return rc;
                                visited++;
                        }
                        off += rec_size(h.len);
                }
        }
        return visited;
}
