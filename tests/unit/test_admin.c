/* SPDX-License-Identifier: MIT */
/* The ADMIN codec (common/admin.c) both ends use: request and reply frames,
 * and the STATUS JSON, whose strings must come out escaped and be read
 * back exactly, whatever bytes they hold. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "admin.h"
#include "frame.h"

static void request_round_trip(void **state)
{
        uint8_t frame[LUP_ADMIN_REQUEST_SIZE];
        char why[LUP_ADMIN_WHY_SIZE];
        struct lup_hdr h;
        const char *hwhy;
        uint16_t cmd = 0;

        lup_admin_request_encode(frame, LUP_ADMIN_DRAIN);
        assert_int_equal(lup_hdr_decode(frame, &h, &hwhy), 0);
        assert_int_equal(h.op, LUP_OP_ADMIN);
        assert_int_equal(lup_admin_request_check(&h, why), 0);
        assert_int_equal(lup_admin_request_decode(frame + LUP_HDR_SIZE, h.len, &cmd), 0);
        assert_int_equal(cmd, LUP_ADMIN_DRAIN);

        h.flags = 0;
        assert_int_equal(lup_admin_request_check(&h, why), -EBADMSG);
        assert_string_equal(why, "ADMIN must be a synchronous request (flags 0x0)");
        h.flags = LUP_F_SYNC;
        h.len = 3;
        assert_int_equal(lup_admin_request_check(&h, why), -EBADMSG);
        assert_string_equal(why, "ADMIN payload must be 2 bytes, or 4 to 1028, not 3");
        cmd = 7;
        assert_int_equal(lup_admin_request_decode(frame + LUP_HDR_SIZE, 1, &cmd), -EBADMSG);
        assert_int_equal(cmd, 7); /* untouched on failure */
}

static void reply_round_trip(void **state)
{
        struct lup_hdr req = { .op = LUP_OP_ADMIN, .flags = LUP_F_SYNC, .lane = 3, .seq = 9 }, h;
        uint8_t frame[LUP_ADMIN_REPLY_SIZE(5)];
        const char *why, *text;
        size_t len, tlen;

        assert_int_equal(lup_admin_reply_encode(frame, sizeof(frame), &req, EPERM, "no :(", 5, &len), 0);
        assert_int_equal(len, sizeof(frame));
        assert_int_equal(lup_hdr_decode(frame, &h, &why), 0);
        assert_int_equal(lup_admin_reply_check(&h), 0);
        assert_int_equal(h.status, EPERM);
        assert_int_equal(h.lane, 3);
        assert_int_equal(h.seq, 9);
        assert_int_equal(lup_admin_reply_decode(frame + LUP_HDR_SIZE, h.len, &text, &tlen), 0);
        assert_int_equal(tlen, 5);
        assert_memory_equal(text, "no :(", 5);
        /* a frame one byte short, and a text over the u16 limit */
        assert_int_equal(lup_admin_reply_encode(frame, sizeof(frame) - 1, &req, 0, "no :(", 5, &len), -EMSGSIZE);
        assert_int_equal(lup_admin_reply_encode(frame, sizeof(frame), &req, 0, "x", LUP_ADMIN_MAX_TEXT + 1, &len),
                         -EMSGSIZE);
        assert_int_equal(lup_admin_reply_decode(frame + LUP_HDR_SIZE, h.len - 1, &text, &tlen), -EBADMSG);
        h.flags = LUP_F_SYNC;
        assert_int_equal(lup_admin_reply_check(&h), -EBADMSG);
}

static struct lup_admin_status *status_new(void)
{
        struct lup_admin_status *st = calloc(1, sizeof(*st));
        assert_non_null(st);
        strcpy(st->version, "0.1.0");
        strcpy(st->backend, "sim");
        st->checkpoints = true;
        st->max_sessions = 64;
        return st;
}

/* What lupined sent before json-c, byte for byte, must not change. */
static void status_encodes_as_before(void **state)
{
        struct lup_admin_status *st = status_new();
        size_t len;
        char *text;

        st->n = 1;
        strcpy(st->s[0].name, "job1");
        strcpy(st->s[0].state, "serving");
        st->s[0].slot = 0;
        st->s[0].pid = 4242;
        assert_int_equal(lup_admin_status_encode(st, &text, &len), 0);
        assert_string_equal(text,
                            "{\"version\":\"0.1.0\",\"backend\":\"sim\",\"draining\":false,\"stopping\":false,"
                            "\"checkpoints\":true,\"max_sessions\":64,\"sessions\":[{\"name\":\"job1\",\"slot\":0,"
                            "\"state\":\"serving\",\"pid\":4242}],\"count\":1}");
        assert_int_equal(len, strlen(text));
        free(text);
        st->n = LUP_ARENA_SLOTS + 1;
        assert_int_equal(lup_admin_status_encode(st, &text, &len), -EINVAL);
        free(st);
}

/* Session names cannot hold these today (lup_session_name_valid), but the
 * encoder must not depend on it. */
static void status_escapes_strings(void **state)
{
        static const char nasty[] = "a\"b\\c\n\x01/d";
        struct lup_admin_status *st = status_new(), *back = calloc(1, sizeof(*back));
        const char *why;
        size_t len;
        char *text;

        assert_non_null(back);
        st->n = 1;
        strcpy(st->s[0].name, nasty);
        strcpy(st->s[0].state, "x\"y");
        assert_int_equal(lup_admin_status_encode(st, &text, &len), 0);
        assert_non_null(strstr(text, "\"name\":\"a\\\"b\\\\c\\n\\u0001/d\""));
        assert_non_null(strstr(text, "\"state\":\"x\\\"y\""));
        assert_int_equal(lup_admin_status_decode(text, len, back, &why), 0);
        assert_string_equal(back->s[0].name, nasty);
        assert_string_equal(back->s[0].state, "x\"y");
        assert_string_equal(back->backend, "sim");
        assert_true(back->checkpoints);
        assert_int_equal(back->max_sessions, 64);
        assert_int_equal(back->n, 1);
        free(text);
        free(back);
        free(st);
}

/* The limits (docs/security.md): after "count", values and hits by name,
 * read back; a limit of the wrong type is refused, too many are refused. */
static void status_limits(void **state)
{
        struct lup_admin_status *st = status_new(), *back = calloc(1, sizeof(*back));
        const char *why;
        size_t len;
        char *text;

        (void)state;
        assert_non_null(back);
        st->n_limits = 2;
        strcpy(st->limits[0].name, "max_pending");
        st->limits[0].value = 256;
        st->limits[0].hits = 7;
        strcpy(st->limits[1].name, "upload_cap_total_mib");
        st->limits[1].value = 1 << 30;
        assert_int_equal(lup_admin_status_encode(st, &text, &len), 0);
        assert_non_null(strstr(text, "\"count\":0,\"limits\":{\"max_pending\":256,\"upload_cap_total_mib\":1073741824},"
                                     "\"limit_hits\":{\"max_pending\":7,\"upload_cap_total_mib\":0}}"));
        assert_int_equal(lup_admin_status_decode(text, len, back, &why), 0);
        assert_int_equal(back->n_limits, 2);
        assert_string_equal(back->limits[0].name, "max_pending");
        assert_int_equal(back->limits[0].value, 256);
        assert_int_equal(back->limits[0].hits, 7);
        assert_int_equal(back->limits[1].value, 1 << 30);
        free(text);
        static const char bad[] = "{\"limits\":{\"x\":\"y\"}}";
        assert_int_equal(lup_admin_status_decode(bad, strlen(bad), back, &why), -EBADMSG);
        char many[2048] = "{\"limits\":{";
        for (unsigned i = 0; i <= LUP_ADMIN_MAX_LIMITS; i++)
                snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s\"l%u\":1", i ? "," : "", i);
        strcat(many, "}}");
        assert_int_equal(lup_admin_status_decode(many, strlen(many), back, &why), -EBADMSG);
        free(back);
        free(st);
}

static int decode(const char *text, struct lup_admin_status *st)
{
        const char *why = NULL;
        int r = lup_admin_status_decode(text, strlen(text), st, &why);
        if (r < 0)
                assert_non_null(why);
        return r;
}

static void status_decode_tolerates_and_rejects(void **state)
{
        struct lup_admin_status *st = calloc(1, sizeof(*st));
        char name[LUP_MAX_NAME + 2];
        char *big;
        size_t off;

        assert_non_null(st);
        /* unknown keys (nested too) are skipped, missing ones stay zero */
        assert_int_equal(decode(" {\"backend\":\"real\",\"new\":{\"a\":[1,2,{\"b\":null}]},"
                                "\"sessions\":[{\"name\":\"j\",\"extra\":1.5}]}\n",
                                st),
                         0);
        assert_string_equal(st->backend, "real");
        assert_false(st->draining);
        assert_int_equal(st->n, 1);
        assert_string_equal(st->s[0].name, "j");
        assert_int_equal(st->s[0].pid, 0);

        strcpy(st->backend, "kept");
        assert_int_equal(decode("", st), -EBADMSG);
        assert_int_equal(decode("[]", st), -EBADMSG);
        assert_int_equal(decode("{\"backend\":\"sim\"} x", st), -EBADMSG);
        assert_int_equal(decode("{\"backend\":\"sim\",}", st), -EBADMSG); /* strict */
        assert_int_equal(decode("{\"draining\":\"yes\"}", st), -EBADMSG);
        assert_int_equal(decode("{\"count\":1.5}", st), -EBADMSG);
        assert_int_equal(decode("{\"sessions\":{}}", st), -EBADMSG);
        assert_int_equal(decode("{\"sessions\":[7]}", st), -EBADMSG);
        assert_int_equal(decode("{\"sessions\":[{\"pid\":99999999999}]}", st), -EBADMSG);
        assert_int_equal(decode("{\"sessions\":[{\"name\":null}]}", st), -EBADMSG);
        assert_int_equal(decode("{\"sessions\":[{\"name\":\"a\\u0000b\"}]}", st), -EBADMSG);
        assert_int_equal(decode("{\"backend\":\"\xff\"}", st), -EBADMSG); /* not UTF-8 */
        assert_int_equal(decode("{\"backend\":\"0123456789012345678901234567890123\"}", st), -EBADMSG);
        memset(name, 'n', sizeof(name) - 1);
        name[sizeof(name) - 1] = 0;
        big = malloc(LUP_ADMIN_MAX_TEXT + 1);
        assert_non_null(big);
        snprintf(big, LUP_ADMIN_MAX_TEXT, "{\"sessions\":[{\"name\":\"%s\"}]}", name);
        assert_int_equal(decode(big, st), -EBADMSG); /* name too long */
        off = (size_t)sprintf(big, "{\"sessions\":[");
        for (unsigned i = 0; i <= LUP_ARENA_SLOTS; i++)
                off += (size_t)sprintf(big + off, "%s{}", i ? "," : "");
        sprintf(big + off, "]}");
        assert_int_equal(decode(big, st), -EBADMSG);                             /* 65 sessions */
        assert_int_equal(decode("{\"a\":[[[[[[[[[[1]]]]]]]]]]}", st), -EBADMSG); /* too deep */
        assert_string_equal(st->backend, "kept");                                /* untouched on failure */
        free(big);
        free(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(request_round_trip),
                cmocka_unit_test(reply_round_trip),
                cmocka_unit_test(status_encodes_as_before),
                cmocka_unit_test(status_escapes_strings),
                cmocka_unit_test(status_limits),
                cmocka_unit_test(status_decode_tolerates_and_rejects),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
