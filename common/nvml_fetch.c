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

int lup_nvml_fetch(const struct lupt_config *c, const char *servers, int io_ms, struct lup_nvml_snapshot *out,
                   char *why, size_t why_cap)
{
        struct lup_server_list list;
        int rc = -ENOENT;

        why[0] = 0;
        if (lup_server_list_parse(servers, &list, why, why_cap) < 0)
                return -EINVAL;
        for (unsigned i = 0; i < list.n_endpoints; i++) {
                const char *tok = list.endpoint[i];
                struct lup_endpoint ep;
                struct lupt_link l;
                if (lup_endpoint_parse(tok, &ep) < 0)
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
                if (rc == 0)
                        return 0;
        }
        return rc;
}
