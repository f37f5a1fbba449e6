/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1 over tls:// (shim/nvml_client.c): one TLS session per
 * snapshot, no hand-off, against a server made here with common/tls.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "nvml_codec.h"
#include "tls.h"
#include "tls_certs.h"

/* libnvidia-ml.so.1's entry points (nvml.h's types reduced to int) */
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *count);

static struct {
        int lfd;
        struct lup_tls_ctx *ctx;
        int served, bad;
        char fail[300];
} srv;

/* Answers one NVML request over TLS with a snapshot of two devices. */
static void serve_one(int fd)
{
        static struct lup_nvml_snapshot snap = { .backend = LUP_BACKEND_SIM, .n_devices = 2 };
        static uint8_t out[LUP_NVML_MAX_REPLY];
        uint8_t hb[LUP_HDR_SIZE], req[LUP_NVML_REQ_SIZE];
        struct lup_hdr h;
        const char *why;
        size_t n;
        struct lup_tls *t = lup_tls_new(srv.ctx, fd, NULL);

        if (!t || lup_tls_handshake(t, 10000) < 0 || lup_tls_read_full(t, hb, sizeof(hb), 10000) < 0 ||
            lup_hdr_decode(hb, &h, &why) < 0 || h.op != LUP_OP_NVML || h.len != LUP_NVML_REQ_SIZE ||
            lup_tls_read_full(t, req, sizeof(req), 10000) < 0 || lup_nvml_req_decode(req, sizeof(req), &why) < 0) {
                srv.bad++;
                snprintf(srv.fail, sizeof(srv.fail), "bad NVML exchange: %s", t ? lup_tls_error(t) : "no TLS");
                lup_tls_free(t, false);
                return;
        }
        assert_int_equal(lup_nvml_encode(&snap, out, sizeof(out), &n), 0);
        struct lup_hdr r = { .len = (uint32_t)n, .op = LUP_OP_NVML, .flags = LUP_F_REPLY };
        lup_hdr_encode(hb, &r);
        if (lup_tls_write_full(t, hb, sizeof(hb)) < 0 || lup_tls_write_full(t, out, n) < 0)
                srv.bad++;
        else
                srv.served++;
        lup_tls_free(t, true);
}

static void *srv_main(void *arg)
{
        sigset_t pipe; /* lupined ignores SIGPIPE; this thread only */
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe, NULL);
        for (;;) {
                struct pollfd pfd = { .fd = srv.lfd, .events = POLLIN };
                if (poll(&pfd, 1, 5000) != 1)
                        return NULL;
                int fd = accept4(srv.lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        return NULL;
                serve_one(fd);
                close(fd);
        }
}

static void test_nvml_tls(void **state)
{
        char dir[] = "/tmp/lupine-test-nvml-tls-XXXXXX", cert[128], key[128], url[64], err[300];
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        pthread_t th;
        unsigned count = 0;

        assert_non_null(mkdtemp(dir));
        assert_int_equal(test_make_cert(dir, "server", "lupine-server", "IP:127.0.0.1"), 0);
        snprintf(cert, sizeof(cert), "%s/server.pem", dir);
        snprintf(key, sizeof(key), "%s/server.key", dir);
        assert_int_equal(lup_tls_server_ctx_new(cert, key, NULL, 0, &srv.ctx, err, sizeof(err)), 0);
        srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(srv.lfd >= 0);
        assert_int_equal(bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(srv.lfd, 8), 0);
        assert_int_equal(getsockname(srv.lfd, (struct sockaddr *)&a, &alen), 0);
        snprintf(url, sizeof(url), "tls://127.0.0.1:%d", ntohs(a.sin_port));
        setenv("LUPINE_SERVER", url, 1);
        setenv("LUPINE_TLS_CA", cert, 1);
        setenv("LUPINE_NVML_WAIT_MS", "2000", 1);
        assert_int_equal(pthread_create(&th, NULL, srv_main, NULL), 0);

        assert_int_equal(nvmlInit_v2(), 0);
        assert_int_equal(nvmlDeviceGetCount_v2(&count), 0);
        assert_int_equal(count, 2);
        usleep(1100 * 1000); /* past the cache: a second snapshot, a second TLS session */
        assert_int_equal(nvmlDeviceGetCount_v2(&count), 0);
        assert_int_equal(count, 2);
        assert_int_equal(nvmlShutdown(), 0);
        shutdown(srv.lfd, SHUT_RDWR);
        pthread_join(th, NULL);
        close(srv.lfd);
        if (srv.bad)
                fail_msg("server: %s", srv.fail);
        assert_int_equal(srv.served, 2);
        lup_tls_ctx_free(srv.ctx);
        unlink(cert);
        unlink(key);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_nvml_tls) };
        return cmocka_run_group_tests_name("nvml over tls", tests, NULL, NULL);
}
