/* SPDX-License-Identifier: MIT */
/* The worker's short names for the checkpoint format's constants. The
 * format itself, its encoders and decoders, is checkpoint/ckpt_codec.h. */
#ifndef LUPD_CKPT_FORMAT_H
#define LUPD_CKPT_FORMAT_H

#include "ckpt_codec.h"

#define PIECE LUP_CKPT_PIECE /* memory is hashed and copied in pieces of this size */

/* Where the memory contents of a checkpoint are (the manifest's memory
 * flags): DURABLE through the provider, HOT exported as fds. */
#define CKPT_MEM_DURABLE LUP_CKPT_MEM_DURABLE
#define CKPT_MEM_HOT     LUP_CKPT_MEM_HOT

#endif
