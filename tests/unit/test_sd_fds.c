/* SPDX-License-Identifier: MIT */
/*
 * daemon/supervisor/sd_fds.c: sorting LISTEN_FDS into listeners and named fds,
 * finding and taking them, releasing the rest. The fds are real: two
 * listening sockets (UNIX, TCP), a pipe, a UDP socket and a connected
 * socket pair, placed at 3, 4, ... as systemd would.
 *
 * The module keeps its state for the life of the process (it is read
 * once at start), so the cases run in order in one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/sd_fds.h"

#define N_FDS 6
static const char *const names = "unix:tcp:hot-s1-0:udp:hot-s1-1:hot-s2-0";

static int listening(int family)
{
        int fd = socket(family, SOCK_STREAM, 0);

        assert_true(fd >= 0);
        if (family == AF_UNIX) {
                struct sockaddr_un un = { .sun_family = AF_UNIX };
                /* abstract, so nothing is left behind */
                snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "lupine-test-sd-fds-%d", (int)getpid());
                assert_int_equal(bind(fd, (struct sockaddr *)&un, sizeof(un)), 0);
        } else {
                struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
        }
        assert_int_equal(listen(fd, 4), 0);
        return fd;
}

static int is_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

/* Places the fds at 3.. and sets the environment, like systemd. */
static void hand_over(void)
{
        int pipefd[2], pair[2], src[N_FDS], high[N_FDS];
        char buf[32];

        assert_int_equal(pipe(pipefd), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
        src[0] = listening(AF_UNIX);
        src[1] = listening(AF_INET);
        src[2] = pipefd[1];
        src[3] = socket(AF_INET, SOCK_DGRAM, 0);
        src[4] = pair[0];
        src[5] = pipefd[0];
        close(pair[1]);
        for (int i = 0; i < N_FDS; i++) {
                high[i] = fcntl(src[i], F_DUPFD, 100);
                assert_true(high[i] >= 100);
                close(src[i]);
        }
        for (int i = 0; i < N_FDS; i++) {
                assert_int_equal(dup2(high[i], 3 + i), 3 + i);
                close(high[i]);
        }
        snprintf(buf, sizeof(buf), "%d", (int)getpid());
        setenv("LISTEN_PID", buf, 1);
        setenv("LISTEN_FDS", "6", 1);
        setenv("LISTEN_FDNAMES", names, 1);
        unsetenv("NOTIFY_SOCKET");
}

static void test_collect(void **state)
{
        (void)state;
        hand_over();
        assert_int_equal(lupd_sd_fds_collect(), 4);
        assert_null(getenv("LISTEN_FDS"));
        assert_null(getenv("LISTEN_PID"));
        assert_null(getenv("LISTEN_FDNAMES"));
        for (int fd = 3; fd < 3 + N_FDS; fd++)
                assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(lupd_sd_fds_collect(), -EALREADY);
}

static void test_listeners(void **state)
{
        (void)state;
        assert_int_equal(lupd_sd_listen_count(), 2);
        assert_int_equal(lupd_sd_listen_fd(0), 3);
        assert_string_equal(lupd_sd_listen_name(0), "unix");
        assert_int_equal(lupd_sd_listen_fd(1), 4);
        assert_string_equal(lupd_sd_listen_name(1), "tcp");
        assert_int_equal(lupd_sd_listen_fd(2), -1);
        assert_null(lupd_sd_listen_name(2));
}

static void test_find_take(void **state)
{
        const struct lupd_fd_entry *e[8];
        size_t n;

        (void)state;
        n = lupd_sd_fds_find("hot-s1-", e, 8);
        assert_int_equal(n, 2);
        assert_string_equal(e[0]->name, "hot-s1-0");
        assert_int_equal(e[0]->fd, 5);
        assert_string_equal(e[1]->name, "hot-s1-1");
        assert_int_equal(e[1]->fd, 7);
        assert_int_equal(lupd_sd_fds_find("hot-", NULL, 0), 3);
        assert_int_equal(lupd_sd_fds_find("", NULL, 0), 4);
        assert_int_equal(lupd_sd_fds_find("hot-", e, 1), 1);
        assert_int_equal(lupd_sd_fds_find("nothing", e, 8), 0);

        n = lupd_sd_fds_find("hot-s1-", e, 8);
        assert_int_equal(lupd_sd_fd_take("hot-s1-1"), 7);
        assert_int_equal(e[1]->fd, -1); /* the pointer stays valid */
        assert_int_equal(lupd_sd_fd_take("hot-s1-1"), -ENOENT);
        assert_int_equal(lupd_sd_fd_take("hot-s1"), -ENOENT); /* names match whole */
        assert_int_equal(lupd_sd_fd_take(NULL), -ENOENT);
        assert_int_equal(lupd_sd_fds_find("hot-s1-", e, 8), 1);
        assert_string_equal(e[0]->name, "hot-s1-0");
}

static void test_release(void **state)
{
        (void)state;
        lupd_sd_fds_release_unclaimed();
        assert_false(is_open(5));
        assert_false(is_open(6));
        assert_false(is_open(8));
        assert_true(is_open(7)); /* taken: the taker's */
        assert_true(is_open(3)); /* listeners are the supervisor's */
        assert_true(is_open(4));
        assert_int_equal(lupd_sd_fds_find("", NULL, 0), 0);
        assert_int_equal(lupd_sd_fd_take("hot-s2-0"), -ENOENT);
        lupd_sd_fds_release_unclaimed(); /* a second call does nothing */
        close(7);
}

static void test_name_valid(void **state)
{
        char longname[300];

        (void)state;
        assert_true(lupd_sd_fd_name_valid("hot-sess.a_0-12"));
        assert_true(lupd_sd_fd_name_valid("with space"));
        assert_false(lupd_sd_fd_name_valid(""));
        assert_false(lupd_sd_fd_name_valid(NULL));
        assert_false(lupd_sd_fd_name_valid("a:b"));
        assert_false(lupd_sd_fd_name_valid("tab\there"));
        assert_false(lupd_sd_fd_name_valid("caf\xc3\xa9"));
        memset(longname, 'x', sizeof(longname));
        longname[LUPD_SD_FD_NAME_MAX] = 0;
        assert_true(lupd_sd_fd_name_valid(longname));
        longname[LUPD_SD_FD_NAME_MAX] = 'x';
        longname[LUPD_SD_FD_NAME_MAX + 1] = 0;
        assert_false(lupd_sd_fd_name_valid(longname));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_collect),
                cmocka_unit_test(test_listeners),
                cmocka_unit_test(test_find_take),
                cmocka_unit_test(test_release),
                cmocka_unit_test(test_name_valid),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
