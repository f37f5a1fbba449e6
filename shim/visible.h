/* SPDX-License-Identifier: MIT */
/*
 * CUDA_VISIBLE_DEVICES in libcuda.so.1 (visible.c; docs/nvml.md, "Device
 * lists"): which of the server's devices this process sees, in which order.
 *
 * Two numberings meet in the shim:
 *   - client ordinals: what the program sees (CUdevice values, location ids
 *     of type DEVICE, cuCtxGetDevice, pointer attributes, ...), 0..visible-1;
 *   - server ordinals: the worker's, on the wire and in its checkpoints.
 * Everything the shim keeps (the device snapshot, contexts, allocations,
 * pools, primary context state) is in client ordinals; a value is turned
 * into a server ordinal where it goes onto the wire (generated stubs do it
 * for the spec's `device` type and `loc=` options) and back where an answer
 * comes off it. Primary context ids are made from the server ordinal, so the
 * id on the wire is the worker's.
 *
 * Installed once, from the HELLO reply's snapshot, before anything else can
 * use it; read-only afterwards, so no lock.
 */
#ifndef LUPC_VISIBLE_H
#define LUPC_VISIBLE_H

#include <stdbool.h>
#include <stdint.h>

#include "lupine/wire.h"

/* Parses spec (the value of CUDA_VISIBLE_DEVICES, or NULL when unset)
 * against the server's n devices, whose 16-byte UUIDs are uuids[i], as the
 * real driver does (visible.c lists the rules): entries separated by
 * commas, each a decimal index or a "GPU-" UUID or unique prefix of one;
 * the list ends at the first entry that names no device, or one already
 * named the other way. ret_map[k] gets the server ordinal of client ordinal
 * k. Returns how many (0..n), or -EINVAL when a device comes twice the same
 * way, two indices or two UUIDs (the driver's cuInit then fails with
 * CUDA_ERROR_INVALID_DEVICE). NULL: all n, in the server's order. Pure: no
 * globals, no logging. */
int lupc_visible_parse(const char *spec, const uint8_t (*uuids)[16], int n, int ret_map[static LUP_MAX_DEVICES]);

/* True when spec is set and can name no device whatever the server has (it
 * is empty, or its first entry is a negative index, or neither an index nor
 * a UUID): cuInit then answers CUDA_ERROR_NO_DEVICE without connecting. */
bool lupc_visible_none(const char *spec);

/* Installs the mapping (from lupc_visible_parse) for n_server devices. */
void lupc_visible_install(const int map[static LUP_MAX_DEVICES], int n_visible, int n_server);

/* Several servers (shim/route.c): counts[p] devices on position p's
 * server; their merged ordinals follow one another in position order. Set
 * before lupc_visible_install, whose n_server is then the sum. */
#define LUPC_VISIBLE_MAX_POSITIONS 8
void lupc_visible_positions(const int counts[], int n);
int lupc_visible_n_positions(void);
/* The position the thread's last call went to (set by shim/route.c):
 * answers that name devices or primary contexts are that server's. */
extern __thread int lupc_visible_pos;
/* The position of client device dev (0 for no device). */
int lupc_dev_position(int dev);

/* Client ordinal -> the ordinal on its server. Outside 0..visible-1 the answer is still
 * a device the server does not have (a negative stays negative; visible + k
 * becomes server count + k), so the server says what the driver says for a
 * bad device. */
int lupc_dev_to_server(int dev);
/* Server ordinal (of position pos's server) -> client ordinal, or -1 when
 * this process cannot see it. lupc_dev_from_server: of the server the
 * thread's last call went to (shim/route.c). */
int lupc_dev_from_server_at(int pos, int sdev);
int lupc_dev_from_server(int sdev);

/* A location id of type loctype (CUmemLocationType): a device ordinal for
 * CU_MEM_LOCATION_TYPE_DEVICE, translated as above; any other id (a NUMA
 * node, the host) passes as it is. */
int lupc_loc_to_server(int loctype, int id);
int lupc_loc_from_server_at(int pos, int loctype, int id);
int lupc_loc_from_server(int loctype, int id);

/* The primary context id of client device dev (made from its server
 * ordinal), and the client device of a primary context id: -1 when id is
 * no primary context id, or that of a device this process cannot see. */
uint64_t lupc_primary_ctx_id(int dev);
int lupc_primary_ctx_dev(uint64_t id);
/* A context id as its server knows it (a primary context's is made from
 * that server's ordinal), and back from position pos's server. */
uint64_t lupc_ctx_to_wire(uint64_t id);
uint64_t lupc_ctx_from_wire_at(int pos, uint64_t id);
uint64_t lupc_ctx_from_wire(uint64_t id);

#endif
