/* SPDX-License-Identifier: MIT */
/*
 * One NVML snapshot of a lupined's GPUs (abi/lupine/nvml_wire.h), fetched
 * over a light connection: connect, one NVML request (with the client's
 * bearer token, if it has one), one reply, close. libnvidia-ml.so.1 keeps
 * it fresh (shim/nvml_client.c); lupinectl --server prints it. Library
 * code: it says why in a buffer, and does not log.
 */
#ifndef LUP_NVML_FETCH_H
#define LUP_NVML_FETCH_H

#include <stddef.h>

#include "nvml_codec.h"
#include "transport.h"


/* The snapshot from the first endpoint of servers (a comma-separated
 * LUPINE_SERVER list: HOST:PORT, tls://HOST:PORT, unix:PATH) that answers,
 * over c (lupt_config_load: TLS contexts, token), each connect, handshake,
 * read and write waiting at most io_ms. 0 with *out filled, or -errno: the
 * last endpoint's failure, -EPROTO for a TLS failure, a refusal or a
 * malformed reply, -ENOENT when servers names no usable endpoint. why
 * (why_cap bytes) then holds a sentence, or "" when strerror(-rc) says it
 * all (a plain connect that failed). */
int lup_nvml_fetch(const struct lupt_config *c, const char *servers, int io_ms, struct lup_nvml_snapshot *out,
                   char *why, size_t why_cap);

#endif
