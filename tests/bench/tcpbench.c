/* SPDX-License-Identifier: MIT */
/*
 * The transport ceiling on this host: 64 B TCP ping-pong over loopback and
 * one TCP stream's throughput, with the socket options lupine uses. Results
 * are JSON lines, like bench.c's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PINGS 20000
#define STREAM_BYTES (4ull << 30)
#define CHUNK (1u << 20)

static int listen_fd;
static int port;

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void full(int fd, void *p, size_t n, int rd)
{
        uint8_t *b = p;
        while (n) {
                ssize_t k = rd ? read(fd, b, n) : write(fd, b, n);
                if (k <= 0) {
                        perror("tcpbench");
                        exit(1);
                }
                b += k;
                n -= (size_t)k;
        }
}

static void nodelay(int fd)
{
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void *server(void *arg)
{
        uint8_t buf[64];
        int fd = accept(listen_fd, NULL, NULL);
        nodelay(fd);
        for (int i = 0; i < PINGS; i++) {
                full(fd, buf, sizeof(buf), 1);
                full(fd, buf, sizeof(buf), 0);
        }
        uint8_t *big = malloc(CHUNK);
        for (uint64_t got = 0; got < STREAM_BYTES; got += CHUNK)
                full(fd, big, CHUNK, 1);
        full(fd, buf, 1, 0);
        free(big);
        close(fd);
        return NULL;
}

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

int main(void)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);
        pthread_t th;
        static double t[PINGS];
        uint8_t buf[64] = { 0 };

        listen_fd = socket(AF_INET, SOCK_STREAM, 0);
        bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa));
        listen(listen_fd, 1);
        getsockname(listen_fd, (struct sockaddr *)&sa, &sl);
        port = ntohs(sa.sin_port);
        pthread_create(&th, NULL, server, NULL);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        nodelay(fd);
        for (int i = 0; i < PINGS; i++) {
                double a = now_us();
                full(fd, buf, sizeof(buf), 0);
                full(fd, buf, sizeof(buf), 1);
                t[i] = now_us() - a;
        }
        qsort(t, PINGS, sizeof(double), cmp_d);
        printf("{\"case\": \"TCP 64 B ping-pong\", \"p50_us\": %.2f, \"p99_us\": %.2f}\n", t[PINGS / 2], t[PINGS * 99 / 100]);
        uint8_t *big = malloc(CHUNK);
        memset(big, 7, CHUNK);
        double a = now_us();
        for (uint64_t sent = 0; sent < STREAM_BYTES; sent += CHUNK)
                full(fd, big, CHUNK, 0);
        full(fd, buf, 1, 1);
        double us = now_us() - a;
        printf("{\"case\": \"TCP single stream\", \"bytes\": %llu, \"gbps\": %.3f, \"us\": %.1f}\n",
               (unsigned long long)STREAM_BYTES, STREAM_BYTES / us / 1e3, us);
        pthread_join(th, NULL);
        free(big);
        close(fd);
        return 0;
}
