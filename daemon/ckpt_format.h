/* SPDX-License-Identifier: MIT */
/* The checkpoint format's constants, shared by worker_ckpt.c (which writes
 * it, and whose header comment describes it) and worker_restore.c. */
#ifndef LUPD_CKPT_FORMAT_H
#define LUPD_CKPT_FORMAT_H

#include "lupine/wire.h"

#define MANIFEST_MAGIC   0x3154504b4350555ull /* "UPCKPT1" */
#define MANIFEST_VERSION 1u
#define MANIFEST_MAX     (256u << 20)         /* the largest manifest a restore reads */
#define PIECE            LUP_BULK_CHUNK       /* memory is hashed and copied in pieces of this size */

#endif
