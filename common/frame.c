/* SPDX-License-Identifier: MIT */
#include "frame.h"

#include <errno.h>
#include <string.h>

#include "buf.h"

void lup_hdr_encode(uint8_t out[static LUP_HDR_SIZE], const struct lup_hdr *h)
{
        lup_put32(out + 0, h->len);
        lup_put16(out + 4, h->op);
        lup_put16(out + 6, h->flags);
        lup_put32(out + 8, h->lane);
        lup_put32(out + 12, h->status);
        lup_put64(out + 16, h->seq);
        lup_put64(out + 24, h->ctx);
        lup_put64(out + 32, 0); /* reserved, must be zero */
}

int lup_hdr_decode(const uint8_t in[static LUP_HDR_SIZE], struct lup_hdr *ret, const char **ret_why)
{
        struct lup_hdr h = {
                .len = lup_le32(in + 0),
                .op = lup_le16(in + 4),
                .flags = lup_le16(in + 6),
                .lane = lup_le32(in + 8),
                .status = lup_le32(in + 12),
                .seq = lup_le64(in + 16),
                .ctx = lup_le64(in + 24),
        };

        *ret_why = NULL;
        if (h.len > LUP_MAX_PAYLOAD)
                *ret_why = "frame length exceeds the limit";
        else if (h.flags & ~LUP_F_KNOWN)
                *ret_why = "unknown frame flags";
        else if (h.lane >= LUP_MAX_LANES)
                *ret_why = "lane id out of range";
        else if (lup_le64(in + 32) != 0)
                *ret_why = "reserved header field is not zero";
        else if (h.op == 0)
                *ret_why = "op 0 is invalid";
        if (*ret_why) {
                memset(ret, 0, sizeof(*ret));
                return -EBADMSG;
        }
        *ret = h;
        return 0;
}

bool lup_session_name_valid(const char *s, size_t n)
{
        if (n == 0 || n > LUP_MAX_NAME)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

int lup_hello_encode(uint8_t *out, size_t cap, const struct lup_hello *h, size_t *ret_len)
{
        struct lup_wr w = lup_wr_init(out, cap);
        size_t n = strnlen(h->name, LUP_MAX_NAME + 1);

        if (!lup_session_name_valid(h->name, n))
                return -EINVAL;
        lup_wr_u32(&w, LUP_PROTO_MAGIC);
        lup_wr_u32(&w, h->proto_version);
        lup_wr_u32(&w, h->cuda_version);
        lup_wr_u32(&w, h->flags);
        lup_wr_str16(&w, h->name, n);
        lup_wr_bytes(&w, h->token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, h->last_seq_seen);
        if (h->flags & LUP_HELLO_HEARTBEAT)
                lup_wr_u32(&w, h->heartbeat_ms);
        if (h->flags & LUP_HELLO_RESEND)
                lup_wr_u64(&w, h->rx_bytes);
        if (h->flags & LUP_HELLO_AUTH) {
                if (h->auth_len == 0 || h->auth_len > LUP_MAX_AUTH)
                        return -EINVAL;
                lup_wr_u16(&w, h->auth_len);
                lup_wr_bytes(&w, h->auth, h->auth_len);
        }
        if (h->flags & LUP_HELLO_AVOID_SLOTS)
                lup_wr_u64(&w, h->avoid_slots);
        if (h->flags & LUP_HELLO_PEER)
                lup_wr_bytes(&w, h->peer_ticket, LUP_TICKET_SIZE);
        if (w.err)
                return w.err;
        *ret_len = w.len;
        return 0;
}

int lup_hello_decode(const uint8_t *p, size_t n, struct lup_hello *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_hello h = { 0 };
        uint32_t magic;
        const char *name;
        size_t name_len;

        lup_rd_u32(&r, &magic);
        lup_rd_u32(&r, &h.proto_version);
        lup_rd_u32(&r, &h.cuda_version);
        lup_rd_u32(&r, &h.flags);
        lup_rd_str16(&r, LUP_MAX_NAME, &name, &name_len);
        lup_rd_copy(&r, h.token, LUP_TOKEN_SIZE);
        lup_rd_u64(&r, &h.last_seq_seen);
        if (h.flags & LUP_HELLO_HEARTBEAT)
                lup_rd_u32(&r, &h.heartbeat_ms);
        if (h.flags & LUP_HELLO_RESEND)
                lup_rd_u64(&r, &h.rx_bytes);
        if (h.flags & LUP_HELLO_AUTH) {
                lup_rd_u16(&r, &h.auth_len);
                if (h.auth_len == 0 || h.auth_len > LUP_MAX_AUTH) {
                        *ret_why = "HELLO bearer token length out of range";
                        return -EBADMSG;
                }
                lup_rd_copy(&r, h.auth, h.auth_len);
        }
        if (h.flags & LUP_HELLO_AVOID_SLOTS)
                lup_rd_u64(&r, &h.avoid_slots);
        if (h.flags & LUP_HELLO_PEER)
                lup_rd_copy(&r, h.peer_ticket, LUP_TICKET_SIZE);
        if (lup_rd_finish(&r) < 0 || (h.flags & ~LUP_HELLO_KNOWN)) {
                *ret_why = "malformed HELLO";
                return -EBADMSG;
        }
        if ((h.flags & LUP_HELLO_PEER) && (h.flags & ~LUP_HELLO_PEER)) {
                *ret_why = "a peer HELLO carries no other flag";
                return -EBADMSG;
        }
        if ((h.flags & LUP_HELLO_HEARTBEAT) &&
            (h.heartbeat_ms < LUP_MIN_HEARTBEAT_MS || h.heartbeat_ms > LUP_MAX_HEARTBEAT_MS)) {
                *ret_why = "HELLO heartbeat interval out of range";
                return -EBADMSG;
        }
        if (magic != LUP_PROTO_MAGIC) {
                *ret_why = "bad protocol magic";
                return -EPROTO;
        }
        if (h.proto_version != LUP_PROTO_VERSION) {
                *ret_why = "unsupported protocol version";
                return -EPROTO;
        }
        if (!lup_session_name_valid(name, name_len)) {
                *ret_why = "invalid session name";
                return -EBADMSG;
        }
        memcpy(h.name, name, name_len);
        h.name[name_len] = 0;
        *ret = h;
        *ret_why = NULL;
        return 0;
}
