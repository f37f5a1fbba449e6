/* SPDX-License-Identifier: MIT */
#include "nvml_fetch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "frame.h"
#include "net.h"
#include "server_list.h"

/* One exchange on a connection: the snapshot into *out. -errno. */
static int fetch_on(const struct lupt_config *c, struct lupt_link *l, struct lup_nvml_snapshot *out, char *why,
                    size_t why_cap)
{
        uint8_t req[LUP_HDR_SIZE + LUP_NVML_REQ_MAX], hb[LUP_HDR_SIZE];
        struct lup_hdr h = { .op = LUP_OP_NVML, .flags = LUP_F_SYNC };
        struct lup_hdr rh;
        const char *bad = NULL;
        int rc;

        /* the bearer token, if any: the server authenticates NVML clients
         * as it does CUDA ones, and lists only the tenant's processes */
        h.len = (uint32_t)lup_nvml_req_encode_auth(req + LUP_HDR_SIZE, c->token, c->token_len);
        lup_hdr_encode(req, &h);
        rc = lupt_write_full(l, req, LUP_HDR_SIZE + h.len);
        if (rc == 0)
                rc = lupt_read_full(l, hb, sizeof(hb));
        if (rc == -EPROTO)
                snprintf(why, why_cap, "%s", lupt_why(l));
        if (rc < 0)
                return rc;
        if (lup_hdr_decode(hb, &rh, &bad) < 0 || rh.op != LUP_OP_NVML || !(rh.flags & LUP_F_REPLY) ||
            rh.len > LUP_NVML_MAX_REPLY) {
                snprintf(why, why_cap, "lupined sent a malformed NVML reply header%s%s", bad ? ": " : "",
                         bad ? bad : "");
                return -EPROTO;
        }
        uint8_t *p = malloc(rh.len ? rh.len : 1);
        if (!p)
                return -ENOMEM;
        rc = lupt_read_full(l, p, rh.len);
        if (rc == 0 && rh.status != 0) {
                struct lup_rd r = lup_rd_init(p, rh.len);
                const char *msg = "";
                size_t n = 0;
                lup_rd_str16(&r, 1024, &msg, &n);
                snprintf(why, why_cap, "lupined refused the NVML request (%u): %.*s", (unsigned)rh.status, (int)n, msg);
                rc = -EPROTO;
        } else if (rc == 0 && lup_nvml_decode(p, rh.len, out, &bad) < 0) {
                snprintf(why, why_cap, "lupined sent a malformed NVML snapshot: %s", bad);
                rc = -EPROTO;
        }
        free(p);
        return rc;
}

/* Position pos's server: the first of its alternatives that answers. */
static int fetch_position(const struct lupt_config *c, const struct lup_server_list *list, unsigned pos, int io_ms,
                          struct lup_nvml_snapshot *out, char *where, size_t where_cap, char *why, size_t why_cap)
{
        int rc = -ENOENT;

        for (unsigned i = list->first[pos]; i < list->first[pos + 1]; i++) {
                struct lup_endpoint ep;
                struct lupt_link l;
                if (lup_endpoint_parse(list->endpoint[i], &ep) < 0)
                        continue;
                int fd = lupt_connect(c, &ep, io_ms, &l, why, why_cap);
                if (fd < 0 && !ep.tls)
                        why[0] = 0; /* strerror(rc) says it */
                if (fd < 0) {
                        rc = fd;
                        continue;
                }
                why[0] = 0;
                lupt_set_timeout(&l, io_ms);
                rc = fetch_on(c, &l, out, why, why_cap);
                lupt_close(&l, true);
                if (rc == 0) {
                        snprintf(where, where_cap, "%s", ep.text);
                        return 0;
                }
        }
        return rc;
}

static int hex_val(char ch)
{
        return ch >= '0' && ch <= '9'   ? ch - '0'
               : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
               : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                        : -1;
}

/* The same GPU shown by two servers gets, at the later one, the UUID the
 * CUDA shim gives it there (shim/hello.c merge_devices): its last byte
 * XORed with 0x10 * position + 1. */
static void uuid_distinct(struct lup_nvml_val *u, unsigned pos)
{
        size_t n = strlen(u->str);
        int hi = n >= 2 ? hex_val(u->str[n - 2]) : -1, lo = n >= 2 ? hex_val(u->str[n - 1]) : -1;
        if (hi < 0 || lo < 0)
                return;
        static const char digits[] = "0123456789abcdef";
        unsigned b = (((unsigned)hi << 4 | (unsigned)lo) ^ (0x10u * pos + 1u)) & 0xffu;
        u->str[n - 2] = digits[b >> 4];
        u->str[n - 1] = digits[b & 0xfu];
}

/* Appends position pos's devices (from `from`, whose server is `where`)
 * to out: names say the server, UUIDs made distinct as above. */
static int merge_position(struct lup_nvml_snapshot *out, const struct lup_nvml_snapshot *from, unsigned pos,
                          const char *where, char *why, size_t why_cap)
{
        if (out->n_devices + from->n_devices > LUP_MAX_DEVICES) {
                snprintf(why, why_cap, "the servers of LUPINE_SERVER have more than %u devices", LUP_MAX_DEVICES);
                return -E2BIG;
        }
        for (uint32_t i = 0; i < from->n_devices; i++) {
                struct lup_nvml_dev *d = &out->dev[out->n_devices];
                *d = from->dev[i];
                struct lup_nvml_val *name = lup_nvml_devval(d, LUP_NVML_K_NAME);
                if (name && name->present) { /* as libcuda.so.1 has it: "NAME (lupine) on HOST:PORT" */
                        size_t len = strlen(name->str);
                        snprintf(name->str + len, sizeof(name->str) - len, "%s on %s",
                                 from->backend == LUP_BACKEND_CUDA ? " (lupine)" : "", where);
                }
                struct lup_nvml_val *u = lup_nvml_devval(d, LUP_NVML_K_UUID);
                for (uint32_t j = 0; u && u->present && j < out->n_devices; j++) {
                        const struct lup_nvml_val *o = lup_nvml_devval(&out->dev[j], LUP_NVML_K_UUID);
                        if (o && strcmp(o->str, u->str) == 0)
                                uuid_distinct(u, pos);
                }
                out->n_devices++;
        }
        return 0;
}

int lup_nvml_fetch(const struct lupt_config *c, const char *servers, int io_ms, struct lup_nvml_snapshot *out,
                   char *why, size_t why_cap)
{
        struct lup_server_list list;
        char where[128];

        why[0] = 0;
        if (lup_server_list_parse(servers, &list, why, why_cap) < 0)
                return -EINVAL;
        if (list.n_positions == 1)
                return fetch_position(c, &list, 0, io_ms, out, where, sizeof(where), why, why_cap);
        /* several servers: one list of their devices, as the CUDA shim has it */
        struct lup_nvml_snapshot *one = malloc(sizeof(*one));
        if (!one)
                return -ENOMEM;
        int rc = 0;
        for (unsigned p = 0; p < list.n_positions && rc == 0; p++) {
                rc = fetch_position(c, &list, p, io_ms, one, where, sizeof(where), why, why_cap);
                if (rc == 0 && p == 0) {
                        *out = *one;
                        out->n_devices = 0;
                }
                if (rc == 0)
                        rc = merge_position(out, one, p, where, why, why_cap);
        }
        free(one);
        return rc;
}
