/* SPDX-License-Identifier: MIT */
/* Copies between servers: the payload codecs (peer_codec.h). */
#include "peer_codec.h"

#include <errno.h>
#include <string.h>

#include "buf.h"
#include "frame.h"

static bool size_ok(uint64_t n)
{
        return n > 0 && n <= LUP_MAX_COPY;
}

void lup_peer_expect_encode(uint8_t out[static LUP_PEER_EXPECT_SIZE], const struct lup_peer_expect *e)
{
        struct lup_wr w = lup_wr_init(out, LUP_PEER_EXPECT_SIZE);
        lup_wr_u64(&w, e->dst);
        lup_wr_u64(&w, e->size);
}

int lup_peer_expect_decode(const uint8_t *p, size_t n, struct lup_peer_expect *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_peer_expect e = { 0 };
        lup_rd_u64(&r, &e.dst);
        lup_rd_u64(&r, &e.size);
        if (lup_rd_finish(&r) < 0 || !size_ok(e.size)) {
                *ret_why = "malformed PEER_EXPECT";
                return -EBADMSG;
        }
        *ret = e;
        *ret_why = NULL;
        return 0;
}

/* A u16-prefixed string of 1..max bytes into out (NUL-terminated). */
static void rd_text(struct lup_rd *r, size_t max, char *out, bool (*valid)(const char *, size_t))
{
        const char *s;
        size_t len;
        if (lup_rd_str16(r, max, &s, &len) < 0 || len == 0 || (valid && !valid(s, len))) {
                r->err = -EBADMSG;
                out[0] = 0;
                return;
        }
        memcpy(out, s, len);
        out[len] = 0;
}

static void wr_ticket(struct lup_wr *w, const struct lup_peer_ticket *t)
{
        lup_wr_bytes(w, t->ticket, LUP_TICKET_SIZE);
        lup_wr_str16(w, t->key, strnlen(t->key, LUP_MAX_NAME));
}

static void rd_ticket(struct lup_rd *r, struct lup_peer_ticket *t)
{
        lup_rd_copy(r, t->ticket, LUP_TICKET_SIZE);
        rd_text(r, LUP_MAX_NAME, t->key, lup_session_name_valid);
}

size_t lup_peer_ticket_encode(uint8_t *out, size_t cap, const struct lup_peer_ticket *t)
{
        struct lup_wr w = lup_wr_init(out, cap);
        wr_ticket(&w, t);
        return w.err ? 0 : w.len;
}

int lup_peer_ticket_decode(const uint8_t *p, size_t n, struct lup_peer_ticket *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        rd_ticket(&r, ret);
        if (lup_rd_finish(&r) < 0) {
                *ret_why = "malformed PEER_EXPECT reply";
                return -EBADMSG;
        }
        *ret_why = NULL;
        return 0;
}

size_t lup_peer_push_encode(uint8_t *out, size_t cap, const struct lup_peer_push *pp)
{
        struct lup_wr w = lup_wr_init(out, cap);
        lup_wr_u64(&w, pp->src);
        lup_wr_u64(&w, pp->size);
        lup_wr_u64(&w, pp->dst);
        wr_ticket(&w, &pp->t);
        lup_wr_str16(&w, pp->endpoint, strnlen(pp->endpoint, LUP_PEER_ENDPOINT_MAX));
        return w.err ? 0 : w.len;
}

int lup_peer_push_decode(const uint8_t *p, size_t n, struct lup_peer_push *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_peer_push pp = { 0 };
        lup_rd_u64(&r, &pp.src);
        lup_rd_u64(&r, &pp.size);
        lup_rd_u64(&r, &pp.dst);
        rd_ticket(&r, &pp.t);
        rd_text(&r, LUP_PEER_ENDPOINT_MAX, pp.endpoint, NULL);
        if (lup_rd_finish(&r) < 0 || !size_ok(pp.size)) {
                *ret_why = "malformed PEER_PUSH";
                return -EBADMSG;
        }
        *ret = pp;
        *ret_why = NULL;
        return 0;
}

size_t lup_peer_result_encode(uint8_t *out, size_t cap, const struct lup_peer_result *res)
{
        struct lup_wr w = lup_wr_init(out, cap);
        lup_wr_u32(&w, res->outcome);
        lup_wr_u32(&w, res->status);
        lup_wr_str16(&w, res->msg, strnlen(res->msg, LUP_PEER_MSG_MAX));
        return w.err ? 0 : w.len;
}

int lup_peer_result_decode(const uint8_t *p, size_t n, struct lup_peer_result *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_peer_result res = { 0 };
        const char *s = "";
        size_t len = 0;
        lup_rd_u32(&r, &res.outcome);
        lup_rd_u32(&r, &res.status);
        lup_rd_str16(&r, LUP_PEER_MSG_MAX, &s, &len);
        if (lup_rd_finish(&r) < 0 || res.outcome > LUP_PEER_RETRY) {
                *ret_why = "malformed PEER_PUSH reply";
                return -EBADMSG;
        }
        memcpy(res.msg, s, len);
        res.msg[len] = 0;
        *ret = res;
        *ret_why = NULL;
        return 0;
}
