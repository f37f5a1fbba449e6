/* SPDX-License-Identifier: MIT */
/*
 * The payloads of copies between servers (lupine/wire.h, "Copies between
 * servers"): PEER_EXPECT and PEER_PUSH, requests and replies. The shim and
 * the worker both use them, so the two ends cannot disagree. Decoders
 * check every length and bound, and say what was wrong in *ret_why.
 */
#ifndef LUP_PEER_CODEC_H
#define LUP_PEER_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "lupine/wire.h"

#define LUP_PEER_EXPECT_SIZE      16u
#define LUP_PEER_ENDPOINT_MAX     127u /* struct lup_endpoint's text */
#define LUP_PEER_MSG_MAX          300u
#define LUP_PEER_PUSH_MAX         (24u + LUP_TICKET_SIZE + 2u + LUP_MAX_NAME + 2u + LUP_PEER_ENDPOINT_MAX)
#define LUP_PEER_EXPECT_REPLY_MAX (LUP_TICKET_SIZE + 2u + LUP_MAX_NAME)
#define LUP_PEER_PUSH_REPLY_MAX   (8u + 2u + LUP_PEER_MSG_MAX)

struct lup_peer_expect {
        uint64_t dst, size;
};

struct lup_peer_ticket {
        uint8_t ticket[LUP_TICKET_SIZE];
        char key[LUP_MAX_NAME + 1]; /* the destination session's key on its server */
};

struct lup_peer_push {
        uint64_t src, size, dst;
        struct lup_peer_ticket t;
        char endpoint[LUP_PEER_ENDPOINT_MAX + 1]; /* the destination's server, as the client reaches it */
};

struct lup_peer_result {
        uint32_t outcome; /* enum lup_peer_outcome */
        uint32_t status;  /* the destination's CUresult (LUP_PEER_DONE) */
        char msg[LUP_PEER_MSG_MAX + 1];
};

void lup_peer_expect_encode(uint8_t out[static LUP_PEER_EXPECT_SIZE], const struct lup_peer_expect *e);
int lup_peer_expect_decode(const uint8_t *p, size_t n, struct lup_peer_expect *ret, const char **ret_why);
/* The reply: ticket and key. Encoders return the length, or 0 if it does not fit. */
size_t lup_peer_ticket_encode(uint8_t *out, size_t cap, const struct lup_peer_ticket *t);
int lup_peer_ticket_decode(const uint8_t *p, size_t n, struct lup_peer_ticket *ret, const char **ret_why);

size_t lup_peer_push_encode(uint8_t *out, size_t cap, const struct lup_peer_push *pp);
int lup_peer_push_decode(const uint8_t *p, size_t n, struct lup_peer_push *ret, const char **ret_why);

size_t lup_peer_result_encode(uint8_t *out, size_t cap, const struct lup_peer_result *r);
int lup_peer_result_decode(const uint8_t *p, size_t n, struct lup_peer_result *ret, const char **ret_why);

#endif
