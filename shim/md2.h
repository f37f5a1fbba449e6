/* SPDX-License-Identifier: MIT */
/*
 * MD2 (RFC 1319, with the errata's checksum rule) and HMAC-MD2 (RFC 2104).
 *
 * Only one thing in lupine needs MD2: the CUDA runtime's integrity check of
 * the driver's private export tables (shim/export_tables.c), which is an
 * HMAC-MD2 by definition. OpenSSL 3 on Debian no longer ships MD2 (it is not
 * even in the legacy provider), so this small, slow, exact implementation
 * lives here. Never use it for anything that needs security.
 */
#ifndef LUP_MD2_H
#define LUP_MD2_H

#include <stddef.h>
#include <stdint.h>

#define LUP_MD2_BLOCK  16
#define LUP_MD2_DIGEST 16

struct lup_md2 {
        uint8_t x[48];   /* the state: X in RFC 1319 */
        uint8_t c[16];   /* running checksum */
        uint8_t l;       /* last checksum byte */
        uint8_t buf[16]; /* the block being filled */
        size_t n;        /* bytes in buf */
};

void lup_md2_init(struct lup_md2 *m);
void lup_md2_update(struct lup_md2 *m, const void *data, size_t len);
void lup_md2_final(struct lup_md2 *m, uint8_t out[LUP_MD2_DIGEST]);
void lup_md2(const void *data, size_t len, uint8_t out[LUP_MD2_DIGEST]);

/* HMAC-MD2 with a key of at most one block (16 bytes); longer keys are
 * hashed first, as RFC 2104 says. */
void lup_hmac_md2(const void *key, size_t keylen, const void *msg, size_t len, uint8_t out[LUP_MD2_DIGEST]);

#endif
