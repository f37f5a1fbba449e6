/* SPDX-License-Identifier: MIT */
/*
 * Frame header codec and the HELLO handshake codec, shared by shim,
 * supervisor and worker. See abi/lupine/wire.h for the layout.
 */
#ifndef LUP_FRAME_H
#define LUP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lupine/wire.h"

void lup_hdr_encode(uint8_t out[static LUP_HDR_SIZE], const struct lup_hdr *h);
/* Decodes and validates a header: payload length within LUP_MAX_PAYLOAD,
 * only known flags, lane below LUP_MAX_LANES. Returns 0 or -EBADMSG and sets
 * *ret_why to a static reason. */
int lup_hdr_decode(const uint8_t in[static LUP_HDR_SIZE], struct lup_hdr *ret, const char **ret_why);

struct lup_hello {
        uint32_t proto_version;
        uint32_t cuda_version;
        uint32_t flags;
        char name[LUP_MAX_NAME + 1];
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t last_seq_seen;
        uint32_t heartbeat_ms;          /* with LUP_HELLO_HEARTBEAT */
        uint64_t rx_bytes;              /* with LUP_HELLO_RESEND */
        uint16_t auth_len;              /* with LUP_HELLO_AUTH: 1..LUP_MAX_AUTH */
        uint8_t auth[LUP_MAX_AUTH];     /* the bearer token */
        uint64_t avoid_slots;           /* with LUP_HELLO_AVOID_SLOTS: bit n, arena slot n */
        uint8_t peer_ticket[LUP_TICKET_SIZE]; /* with LUP_HELLO_PEER: PEER_EXPECT's ticket */
};

/* Session names: 1..LUP_MAX_NAME bytes of [A-Za-z0-9._-]. */
bool lup_session_name_valid(const char *s, size_t n);

int lup_hello_encode(uint8_t *out, size_t cap, const struct lup_hello *h, size_t *ret_len);
/* Returns 0, -EBADMSG (malformed) or -EPROTO (wrong magic/version), with *ret_why. */
int lup_hello_decode(const uint8_t *p, size_t n, struct lup_hello *ret, const char **ret_why);

#endif
