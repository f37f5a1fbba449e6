/* SPDX-License-Identifier: MIT */
/* The checkpoint format's constants, shared by worker/ckpt.c (which writes
 * it, and whose header comment describes it) and worker/restore.c. */
#ifndef LUPD_CKPT_FORMAT_H
#define LUPD_CKPT_FORMAT_H

#include "lupine/wire.h"

#define MANIFEST_MAGIC   0x3154504b4350555ull /* "UPCKPT1" */
#define MANIFEST_VERSION 2u                  /* 2: memory flags after the version */
#define MANIFEST_VERSION_MIN 1u              /* the oldest this lupined reads */
#define MANIFEST_MAX     (256u << 20)         /* the largest manifest a restore reads */
#define PIECE            LUP_BULK_CHUNK       /* memory is hashed and copied in pieces of this size */

/* Version 2's memory flags: where the memory contents are.
 *   DURABLE  objects mem/<addr> through the provider, hashed per piece;
 *   HOT      exported as fds (fd store or an upgrade's re-exec).
 * A version 1 manifest is DURABLE. */
#define CKPT_MEM_DURABLE 1u
#define CKPT_MEM_HOT     2u

#endif
