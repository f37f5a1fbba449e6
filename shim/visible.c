/* SPDX-License-Identifier: MIT */
/*
 * CUDA_VISIBLE_DEVICES: the parsing (pure) and the two numberings' tables
 * (visible.h says which numbering lives where).
 */
#include <ctype.h>
#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "visible.h"

/* ---- parsing
 *
 * What driver 580 does, measured on an H200 (docs/nvml.md, "Device lists"):
 *   - entries are separated by commas; the list ends at the first entry
 *     that names no device (empty, neither form below, out of range, or a
 *     UUID prefix that fits no device or several);
 *   - an index is read as strtol reads it: blanks, a sign and decimal digits,
 *     and whatever follows is ignored (" 0", "+0", "00", "0x0", "0abc" are all
 *     device 0; "-1" names none);
 *   - a UUID is "GPU-" (or "MIG-", which names the GPU itself when MIG is off)
 *     and hexadecimal digits of either case, dashes anywhere; a prefix of one
 *     digit or more is enough when it fits one device only; past 32 digits
 *     nothing more is read; another character before that fits no device;
 *   - blanks before a UUID make it no UUID (" GPU-..." names no device);
 *   - the same index twice, or the same UUID twice, makes cuInit fail
 *     (CUDA_ERROR_INVALID_DEVICE); a device named again the other way
 *     ("GPU-...,0") ends the list.
 */

/* The index an entry at s reads as: its value (clamped to the long range),
 * or false when it is no index (no digits). */
static bool read_index(const char *s, long *ret)
{
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s)
                return false;
        *ret = v;
        return true;
}

/* The hexadecimal digits of a UUID entry [s, s + len) as nibbles (at most
 * 32): how many, or -1 when it is no UUID entry or holds another character
 * before its 32nd digit. */
static int uuid_nibbles(const char *s, size_t len, uint8_t nib[static 32])
{
        int k = 0;
        if (len < 4 || (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0))
                return -1;
        for (size_t i = 4; i < len && k < 32; i++) {
                char c = s[i];
                if (c == '-')
                        continue;
                if (!isxdigit((unsigned char)c))
                        return -1;
                nib[k++] = (uint8_t)(isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10);
        }
        return k ? k : -1;
}

/* The one device whose UUID begins with the k nibbles, else -1. */
static int uuid_device(const uint8_t nib[static 32], int k, const uint8_t (*uuids)[16], int n)
{
        int found = -1;
        for (int d = 0; d < n; d++) {
                int j = 0;
                while (j < k && nib[j] == ((uuids[d][j / 2] >> (j % 2 ? 0 : 4)) & 0xf))
                        j++;
                if (j < k)
                        continue;
                if (found >= 0)
                        return -1; /* not unique */
                found = d;
        }
        return found;
}

int lupc_visible_parse(const char *spec, const uint8_t (*uuids)[16], int n, int ret_map[static LUP_MAX_DEVICES])
{
        bool by_index[LUP_MAX_DEVICES] = { false };
        int k = 0;

        /* by_index[d]: device d came as an index (else as a UUID) */

        if (n > (int)LUP_MAX_DEVICES)
                n = (int)LUP_MAX_DEVICES;
        if (!spec) {
                for (k = 0; k < n; k++)
                        ret_map[k] = k;
                return n;
        }
        for (const char *p = spec;;) {
                size_t len = strcspn(p, ",");
                uint8_t nib[32];
                long idx;
                int dev = -1, nn;
                bool index = read_index(p, &idx);
                if (index)
                        dev = idx >= 0 && idx < n ? (int)idx : -1;
                else if ((nn = uuid_nibbles(p, len, nib)) > 0)
                        dev = uuid_device(nib, nn, uuids, n);
                if (dev < 0)
                        break;
                for (int j = 0; j < k; j++) {
                        if (ret_map[j] != dev)
                                continue;
                        /* the same way twice: the driver refuses the list;
                         * the other way: the list ends */
                        return by_index[dev] == index ? -EINVAL : k;
                }
                by_index[dev] = index;
                ret_map[k++] = dev;
                if (!p[len])
                        break;
                p += len + 1;
        }
        return k;
}

bool lupc_visible_none(const char *spec)
{
        long idx;
        uint8_t nib[32];

        if (!spec)
                return false;
        if (read_index(spec, &idx))
                return idx < 0;
        return uuid_nibbles(spec, strcspn(spec, ","), nib) <= 0;
}

/* ---- the tables
 *
 * With several servers (LUPINE_SERVER positions, shim/route.c) the
 * server ordinals of the tables are "merged" ordinals: position p's server
 * ordinal s is merged ordinal offset[p] + s, position 0's devices first.
 * With one server they are the server's own. */

static int n_vis, n_srv;
static int to_srv[LUP_MAX_DEVICES];
static int from_srv[LUP_MAX_DEVICES];
static int n_pos = 1;
__thread int lupc_visible_pos;
static int offset[LUPC_VISIBLE_MAX_POSITIONS + 1];

void lupc_visible_install(const int map[static LUP_MAX_DEVICES], int n_visible, int n_server)
{
        n_vis = n_visible;
        n_srv = n_server;
        for (int i = 0; i < (int)LUP_MAX_DEVICES; i++)
                from_srv[i] = -1;
        for (int k = 0; k < n_visible; k++) {
                to_srv[k] = map[k];
                from_srv[map[k]] = k;
        }
        if (n_pos == 1)
                offset[1] = n_server;
}

void lupc_visible_positions(const int counts[], int n)
{
        n_pos = n < 1 ? 1 : n > (int)LUPC_VISIBLE_MAX_POSITIONS ? (int)LUPC_VISIBLE_MAX_POSITIONS : n;
        offset[0] = 0;
        for (int p = 0; p < n_pos; p++)
                offset[p + 1] = offset[p] + (p < n ? counts[p] : 0);
}

int lupc_visible_n_positions(void)
{
        return n_pos;
}

/* The position of merged ordinal m (0 when there is none). */
static int position_of_merged(int m)
{
        for (int p = n_pos - 1; p > 0; p--)
                if (m >= offset[p])
                        return m < offset[p + 1] ? p : 0;
        return 0;
}

int lupc_dev_position(int dev)
{
        return dev >= 0 && dev < n_vis ? position_of_merged(to_srv[dev]) : 0;
}

int lupc_dev_to_server(int dev)
{
        if (dev < 0)
                return dev;
        if (dev < n_vis) {
                int m = to_srv[dev];
                return m - offset[position_of_merged(m)];
        }
        /* no device of the server's either; never wraps */
        return dev - n_vis > INT32_MAX - n_srv ? INT32_MAX : n_srv + (dev - n_vis);
}

int lupc_dev_from_server_at(int pos, int sdev)
{
        if (pos < 0 || pos >= n_pos || sdev < 0 || sdev >= offset[pos + 1] - offset[pos])
                return -1;
        int m = offset[pos] + sdev;
        return m < n_srv && m < (int)LUP_MAX_DEVICES ? from_srv[m] : -1;
}

int lupc_loc_to_server(int loctype, int id)
{
        return loctype == CU_MEM_LOCATION_TYPE_DEVICE ? lupc_dev_to_server(id) : id;
}

int lupc_loc_from_server_at(int pos, int loctype, int id)
{
        return loctype == CU_MEM_LOCATION_TYPE_DEVICE ? lupc_dev_from_server_at(pos, id) : id;
}

/* Primary context ids are made from the merged ordinal on the client's
 * side and from the server's own on the wire: the same with one server. */
uint64_t lupc_primary_ctx_id(int dev)
{
        return LUP_PRIMARY_CTX_ID(dev >= 0 && dev < n_vis ? to_srv[dev] : lupc_dev_to_server(dev));
}

int lupc_primary_ctx_dev(uint64_t id)
{
        int m = lup_primary_ctx_device(id);
        return m < 0 || m >= n_srv ? -1 : from_srv[m];
}

uint64_t lupc_ctx_to_wire(uint64_t id)
{
        int m = lup_primary_ctx_device(id);
        return m < 0 ? id : LUP_PRIMARY_CTX_ID(m - offset[position_of_merged(m)]);
}

uint64_t lupc_ctx_from_wire_at(int pos, uint64_t id)
{
        int s = lup_primary_ctx_device(id);
        return s < 0 || pos < 0 || pos >= n_pos ? id : LUP_PRIMARY_CTX_ID(offset[pos] + s);
}

int lupc_dev_from_server(int sdev)
{
        return lupc_dev_from_server_at(lupc_visible_pos, sdev);
}

int lupc_loc_from_server(int loctype, int id)
{
        return lupc_loc_from_server_at(lupc_visible_pos, loctype, id);
}

uint64_t lupc_ctx_from_wire(uint64_t id)
{
        return lupc_ctx_from_wire_at(lupc_visible_pos, id);
}
