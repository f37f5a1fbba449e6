/* SPDX-License-Identifier: MIT */
/* The NVML snapshot's codec (common/nvml_codec.c): round trip, and every
 * malformed form the decoder must refuse. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "nvml_codec.h"

static struct lup_nvml_snapshot *sample(void)
{
        struct lup_nvml_snapshot *s = calloc(1, sizeof(*s));

        s->backend = LUP_BACKEND_SIM;
        s->n_devices = 2;
        s->taken_ms = 123456789;
        lup_nvml_set_str(lup_nvml_sys(s, LUP_NVML_K_DRIVER_VERSION), "580.00");
        lup_nvml_set_num(lup_nvml_sys(s, LUP_NVML_K_CUDA_VERSION), 13000);
        lup_nvml_set_ret(lup_nvml_sys(s, LUP_NVML_K_NVML_VERSION), 3);
        for (unsigned d = 0; d < 2; d++) {
                lup_nvml_set_str(lup_nvml_devval(&s->dev[d], LUP_NVML_K_NAME), "NVIDIA H200");
                lup_nvml_set_num(lup_nvml_devval(&s->dev[d], LUP_NVML_K_MEM_TOTAL), 150ull << 30);
                lup_nvml_set_ret(lup_nvml_devval(&s->dev[d], LUP_NVML_K_FAN), 3);
        }
        s->dev[1].n_procs = 2;
        s->dev[1].procs[0] = (struct lup_nvml_proc){ 77, 1 << 20 };
        s->dev[1].procs[1] = (struct lup_nvml_proc){ 78, ~0ull };
        return s;
}

static uint8_t *encode(const struct lup_nvml_snapshot *s, size_t *len)
{
        uint8_t *buf = malloc(LUP_NVML_MAX_REPLY);

        assert_int_equal(lup_nvml_encode(s, buf, LUP_NVML_MAX_REPLY, len), 0);
        return buf;
}

static void roundtrip(void **state)
{
        struct lup_nvml_snapshot *s = sample(), *t = malloc(sizeof(*t));
        const char *why = NULL;
        size_t len;
        uint8_t *buf = encode(s, &len);

        assert_int_equal(lup_nvml_decode(buf, len, t, &why), 0);
        assert_int_equal(t->n_devices, 2);
        assert_int_equal(t->backend, LUP_BACKEND_SIM);
        assert_true(t->taken_ms == 123456789);
        assert_string_equal(lup_nvml_sys(t, LUP_NVML_K_DRIVER_VERSION)->str, "580.00");
        assert_int_equal(lup_nvml_sys(t, LUP_NVML_K_CUDA_VERSION)->num, 13000);
        assert_int_equal(lup_nvml_sys(t, LUP_NVML_K_NVML_VERSION)->ret, 3);
        assert_string_equal(lup_nvml_devval(&t->dev[1], LUP_NVML_K_NAME)->str, "NVIDIA H200");
        assert_true(lup_nvml_devval(&t->dev[0], LUP_NVML_K_MEM_TOTAL)->num == 150ull << 30);
        assert_int_equal(lup_nvml_devval(&t->dev[0], LUP_NVML_K_FAN)->ret, 3);
        /* a key never sent reads as not supported */
        assert_int_equal(lup_nvml_devval(&t->dev[0], LUP_NVML_K_POWER)->ret, LUP_NVML_NOT_SUPPORTED);
        assert_int_equal(t->dev[1].n_procs, 2);
        assert_int_equal(t->dev[1].procs[0].pid, 77);
        assert_true(t->dev[1].procs[1].used == ~0ull);
        assert_null(lup_nvml_devval(&t->dev[0], LUP_NVML_K_DEV_LAST));
        assert_null(lup_nvml_sys(t, LUP_NVML_K_NAME));
        free(buf);
        free(s);
        free(t);
}

/* Decoding buf with one change must fail. */
static void refused(uint8_t *buf, size_t len)
{
        struct lup_nvml_snapshot *t = malloc(sizeof(*t));
        const char *why = NULL;

        assert_int_equal(lup_nvml_decode(buf, len, t, &why), -EBADMSG);
        assert_non_null(why);
        free(t);
}

static void malformed(void **state)
{
        struct lup_nvml_snapshot *s = sample();
        size_t len;
        uint8_t *buf = encode(s, &len);
        /* the first system entry starts after the 24-byte header and its count */
        const size_t sys0 = 28;

        for (size_t n = 0; n < len; n++)
                refused(buf, n); /* every truncation */
        uint8_t *big = malloc(len + 1);
        memcpy(big, buf, len);
        big[len] = 0;
        refused(big, len + 1); /* a trailing byte */
        free(big);

        lup_put32(buf, 0x12345678); /* magic */
        refused(buf, len);
        lup_put32(buf, LUP_NVML_MAGIC);
        lup_put32(buf + 12, LUP_MAX_DEVICES + 1); /* device count */
        refused(buf, len);
        lup_put32(buf + 12, 2);
        lup_put32(buf + 24, LUP_NVML_N_SYS + 1); /* system value count */
        refused(buf, len);
        lup_put32(buf + 24, 3);
        lup_put16(buf + sys0, 999); /* unknown key */
        refused(buf, len);
        lup_put16(buf + sys0, LUP_NVML_K_NAME); /* a device key among the system's */
        refused(buf, len);
        lup_put16(buf + sys0, LUP_NVML_K_DRIVER_VERSION);
        lup_put16(buf + sys0 + 2, LUP_NVML_MAX_STR + 1); /* string too long */
        refused(buf, len);
        lup_put16(buf + sys0 + 2, 6);
        buf[sys0 + 8 + 2] = 0; /* a NUL inside a string */
        refused(buf, len);
        free(buf);

        /* a key twice */
        memset(s, 0, sizeof(*s));
        lup_nvml_set_num(lup_nvml_sys(s, LUP_NVML_K_CUDA_VERSION), 1);
        buf = encode(s, &len);
        uint8_t *dup = malloc(len + 16);
        memcpy(dup, buf, 24);
        lup_put32(dup + 24, 2);
        memcpy(dup + 28, buf + 28, 16);
        memcpy(dup + 44, buf + 28, 16);
        refused(dup, 60);
        /* a number that is not 8 bytes long */
        lup_put32(dup + 24, 1);
        lup_put16(dup + 28 + 2, 4);
        refused(dup, 40);
        /* a failed value that carries bytes */
        lup_put16(dup + 28 + 2, 8);
        lup_put32(dup + 28 + 4, 3);
        refused(dup, 44);
        free(dup);
        free(buf);

        /* too many processes */
        memset(s, 0, sizeof(*s));
        s->n_devices = 1;
        buf = encode(s, &len);
        lup_put32(buf + len - 4, LUP_NVML_MAX_PROCS + 1);
        refused(buf, len);
        free(buf);
        free(s);
}

static void request(void **state)
{
        uint8_t req[LUP_NVML_REQ_SIZE];
        const char *why = NULL;

        lup_nvml_req_encode(req);
        assert_int_equal(lup_nvml_req_decode(req, sizeof(req), &why), 0);
        assert_int_equal(lup_nvml_req_decode(req, sizeof(req) - 1, &why), -EBADMSG);
        req[12] = 1; /* flags */
        assert_int_equal(lup_nvml_req_decode(req, sizeof(req), &why), -EBADMSG);
        req[12] = 0;
        req[8] = 2; /* what */
        assert_int_equal(lup_nvml_req_decode(req, sizeof(req), &why), -EBADMSG);
}

/* The largest snapshot fits the bound the shim allocates for. */
static void largest(void **state)
{
        struct lup_nvml_snapshot *s = calloc(1, sizeof(*s));
        char longest[LUP_NVML_MAX_STR + 1];
        size_t len;

        memset(longest, 'x', LUP_NVML_MAX_STR);
        longest[LUP_NVML_MAX_STR] = 0;
        s->n_devices = LUP_MAX_DEVICES;
        for (unsigned k = LUP_NVML_K_DRIVER_VERSION; k < LUP_NVML_K_SYS_LAST; k++)
                lup_nvml_set_str(lup_nvml_sys(s, k), longest);
        for (unsigned d = 0; d < LUP_MAX_DEVICES; d++) {
                for (unsigned k = LUP_NVML_K_NAME; k < LUP_NVML_K_DEV_LAST; k++)
                        lup_nvml_set_str(lup_nvml_devval(&s->dev[d], k), longest);
                s->dev[d].n_procs = LUP_NVML_MAX_PROCS;
        }
        uint8_t *buf = encode(s, &len);
        assert_true(len <= LUP_NVML_MAX_REPLY);
        assert_true(LUP_HDR_SIZE + LUP_NVML_MAX_REPLY <= LUP_MAX_PAYLOAD);
        free(buf);
        free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(roundtrip),
                cmocka_unit_test(malformed),
                cmocka_unit_test(request),
                cmocka_unit_test(largest),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
