/* SPDX-License-Identifier: MIT */
/* A fast 64-bit content hash for checkpoint chunks and manifests. It
 * detects corruption; it is not a cryptographic hash. */
#ifndef LUP_HASH_H
#define LUP_HASH_H
#include <stddef.h>
#include <stdint.h>
uint64_t lup_hash64(const void *p, size_t n, uint64_t seed);
#endif
