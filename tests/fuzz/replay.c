/* SPDX-License-Identifier: MIT */
/*
 * A main() for the fuzz targets when they are built without libFuzzer (the
 * default build, any compiler), so CI runs every target as a plain test.
 *
 *   fuzz_<target> [-n ITERATIONS] [-s SEED] [-t SECONDS] PATH...
 *
 * Every PATH that is a file, and every regular file directly inside a PATH
 * that is a directory (in name order), is passed once to
 * LLVMFuzzerTestOneInput. Then ITERATIONS inputs (default 200000) derived
 * from those files by a pseudo-random generator with a fixed SEED (default
 * 1) are run: bit flips, byte and integer overwrites with boundary values,
 * truncations, insertions, splices of 8-byte words between files, and random
 * inputs of random length. The same arguments give the same inputs, so a
 * failure is reproducible; the random phase also stops after SECONDS
 * (default 10) of wall time to keep the test short on a slow machine.
 *
 * Each input is copied into a heap buffer of exactly its size first, so a
 * build with -Db_sanitize=address catches an over-read by one byte. When an
 * input kills the process with a signal (an assert() in the target, or a
 * crash), it is written to ./fuzz-crash.bin, or to $LUP_FUZZ_CRASH_FILE, and
 * the file can be replayed by naming it on the command line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILE_BYTES (4u << 20) /* larger files are refused, as libFuzzer's -max_len would */
#define MAX_RANDOM_LEN 512u

struct input {
        char *name;
        uint8_t *p;
        size_t n;
};

static struct input *corpus;
static size_t n_corpus, cap_corpus;

/* What the signal handler writes out: the input being run. */
static const uint8_t *volatile cur_p;
static volatile size_t cur_n;
static const char *volatile cur_name; /* the corpus file, or NULL for a mutation */
static const char *crash_path = "fuzz-crash.bin";

static void write_all(int fd, const void *p, size_t n)
{
        const uint8_t *b = p;
        while (n > 0) {
                ssize_t k = write(fd, b, n);
                if (k <= 0)
                        return;
                b += k;
                n -= (size_t)k;
        }
}

static void on_fatal_signal(int sig)
{
        static const char msg[] = "replay: input that crashed written to ";
        int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
                write_all(fd, (const void *)cur_p, cur_n);
                close(fd);
                write_all(STDERR_FILENO, msg, sizeof(msg) - 1);
                write_all(STDERR_FILENO, crash_path, strlen(crash_path));
                if (cur_name) {
                        write_all(STDERR_FILENO, " (from ", 7);
                        write_all(STDERR_FILENO, (const char *)cur_name, strlen((const char *)cur_name));
                        write_all(STDERR_FILENO, ")", 1);
                }
                write_all(STDERR_FILENO, "\n", 1);
        }
        signal(sig, SIG_DFL);
        raise(sig);
}

static void run_one(const uint8_t *p, size_t n)
{
        /* exactly n bytes (malloc(0) may return NULL: use 1 then) */
        uint8_t *copy = malloc(n ? n : 1);
        if (!copy) {
                fprintf(stderr, "replay: out of memory\n");
                exit(1);
        }
        if (n)
                memcpy(copy, p, n);
        cur_p = copy;
        cur_n = n;
        LLVMFuzzerTestOneInput(copy, n);
        cur_p = NULL;
        cur_n = 0;
        free(copy);
}

static int add_file(const char *path)
{
        FILE *f = fopen(path, "rbe");
        if (!f) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        uint8_t *buf = malloc(MAX_FILE_BYTES + 1);
        size_t n = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
        int err = !buf || ferror(f);
        fclose(f);
        if (err || n > MAX_FILE_BYTES) {
                fprintf(stderr, "replay: %s: %s\n", path, err ? "read error" : "larger than 4 MiB");
                free(buf);
                return -1;
        }
        if (n_corpus == cap_corpus) {
                size_t ncap = cap_corpus ? cap_corpus * 2 : 64;
                struct input *nc = realloc(corpus, ncap * sizeof(*nc));
                if (!nc) {
                        free(buf);
                        return -1;
                }
                corpus = nc;
                cap_corpus = ncap;
        }
        corpus[n_corpus++] = (struct input){ .name = strdup(path), .p = buf, .n = n };
        return 0;
}

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(const char *path)
{
        struct stat st;
        if (stat(path, &st) < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        if (!S_ISDIR(st.st_mode))
                return add_file(path);

        DIR *d = opendir(path);
        if (!d) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -1;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        int rc = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        char **nn = realloc(names, cap * sizeof(*nn));
                        if (!nn) {
                                rc = -1;
                                break;
                        }
                        names = nn;
                }
                if (asprintf(&names[n], "%s/%s", path, e->d_name) < 0) {
                        rc = -1;
                        break;
                }
                n++;
        }
        closedir(d);
        qsort(names, n, sizeof(*names), cmp_names);
        for (size_t i = 0; i < n; i++) {
                if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
                        rc = add_file(names[i]);
                free(names[i]);
        }
        free(names);
        return rc;
}

/* ---- the mutator: splitmix64, so a seed gives the same stream everywhere */

static uint64_t rng_state;

static uint64_t rnd(void)
{
        uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static size_t below(size_t n)
{
        return n ? (size_t)(rnd() % n) : 0;
}

/* Boundary values worth trying in any integer field. */
static const uint64_t interesting[] = {
        0, 1, 2, 3, 4, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000,
        0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull,
        0x8000000000000000ull, 0xffffffffffffffffull, 0xfffffffffffffffeull,
        4096, 1u << 20, (1u << 20) + 4096, 2u << 20, 1ull << 40,
};

static void put_le(uint8_t *p, size_t width, uint64_t v)
{
        for (size_t i = 0; i < width; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, size_t width)
{
        uint64_t v = 0;
        for (size_t i = 0; i < width; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

/* One mutation of buf[0..*n) in place; cap is the buffer's size. */
static void mutate_once(uint8_t *buf, size_t *n, size_t cap)
{
        static const size_t widths[] = { 1, 2, 4, 8 };
        size_t len = *n;

        switch (below(9)) {
        case 0: /* flip a bit */
                if (len)
                        buf[below(len)] ^= (uint8_t)(1u << below(8));
                break;
        case 1: /* a random byte */
                if (len)
                        buf[below(len)] = (uint8_t)rnd();
                break;
        case 2: { /* an integer field set to a boundary value */
                size_t w = widths[below(4)];
                if (len >= w) {
                        uint64_t v = interesting[below(sizeof(interesting) / sizeof(interesting[0]))];
                        if (rnd() & 1)
                                v = -v;
                        put_le(buf + below(len - w + 1), w, v);
                }
                break;
        }
        case 3: { /* small arithmetic on an integer field (walks range checks) */
                size_t w = widths[below(4)];
                if (len >= w) {
                        size_t at = below(len - w + 1);
                        int64_t d = (int64_t)below(65) - 32;
                        if (rnd() & 1)
                                d *= 4096;
                        put_le(buf + at, w, get_le(buf + at, w) + (uint64_t)d);
                }
                break;
        }
        case 4: /* truncate */
                *n = below(len + 1);
                break;
        case 5: { /* insert random bytes */
                size_t k = 1 + below(16);
                if (len + k <= cap) {
                        size_t at = below(len + 1);
                        memmove(buf + at + k, buf + at, len - at);
                        for (size_t i = 0; i < k; i++)
                                buf[at + i] = (uint8_t)rnd();
                        *n = len + k;
                }
                break;
        }
        case 6: { /* delete a range */
                if (len) {
                        size_t at = below(len), k = 1 + below(len - at);
                        memmove(buf + at, buf + at + k, len - at - k);
                        *n = len - k;
                }
                break;
        }
        case 7: { /* splice: an 8-byte word from another corpus file */
                if (n_corpus && len >= 8) {
                        const struct input *o = &corpus[below(n_corpus)];
                        if (o->n >= 8)
                                memcpy(buf + below(len - 7), o->p + below(o->n - 7), 8);
                }
                break;
        }
        case 8: /* append random bytes */
                while (*n < cap && (rnd() & 7))
                        buf[(*n)++] = (uint8_t)rnd();
                break;
        }
}

static void run_mutations(unsigned long iterations, double seconds)
{
        size_t maxlen = MAX_RANDOM_LEN;
        for (size_t i = 0; i < n_corpus; i++)
                if (corpus[i].n > maxlen)
                        maxlen = corpus[i].n;
        size_t cap = maxlen + 64;
        uint8_t *buf = malloc(cap);
        if (!buf) {
                fprintf(stderr, "replay: out of memory\n");
                exit(1);
        }
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        unsigned long i;
        for (i = 0; i < iterations; i++) {
                if ((i & 1023) == 0) {
                        clock_gettime(CLOCK_MONOTONIC, &t);
                        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
                                break;
                }
                size_t n;
                if (n_corpus == 0 || below(16) == 0) {
                        /* a random input of random length */
                        n = below(MAX_RANDOM_LEN + 1);
                        for (size_t k = 0; k < n; k++)
                                buf[k] = (uint8_t)rnd();
                } else {
                        const struct input *in = &corpus[below(n_corpus)];
                        n = in->n;
                        memcpy(buf, in->p, n);
                        for (size_t k = 1 + below(4); k > 0; k--)
                                mutate_once(buf, &n, cap);
                }
                run_one(buf, n);
        }
        free(buf);
        printf("replay: %lu mutated inputs\n", i);
}

static void usage(const char *argv0)
{
        fprintf(stderr, "usage: %s [-n ITERATIONS] [-s SEED] [-t SECONDS] FILE-OR-DIR...\n", argv0);
        exit(2);
}

int main(int argc, char **argv)
{
        unsigned long iterations = 200000;
        unsigned long long seed = 1;
        double seconds = 10;
        int opt;

        while ((opt = getopt(argc, argv, "n:s:t:")) != -1) {
                char *end;
                errno = 0;
                switch (opt) {
                case 'n':
                        iterations = strtoul(optarg, &end, 0);
                        break;
                case 's':
                        seed = strtoull(optarg, &end, 0);
                        break;
                case 't':
                        seconds = strtod(optarg, &end);
                        break;
                default:
                        usage(argv[0]);
                }
                if (errno || *end || end == optarg)
                        usage(argv[0]);
        }
        if (optind == argc)
                usage(argv[0]);

        const char *env = getenv("LUP_FUZZ_CRASH_FILE");
        if (env && *env)
                crash_path = env;
        static const int fatal[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
        for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
                signal(fatal[i], on_fatal_signal);

        for (int i = optind; i < argc; i++)
                if (add_path(argv[i]) < 0)
                        return 1;
        for (size_t i = 0; i < n_corpus; i++) {
                cur_name = corpus[i].name;
                run_one(corpus[i].p, corpus[i].n);
        }
        cur_name = NULL;
        printf("replay: %zu corpus files\n", n_corpus);

        rng_state = seed;
        run_mutations(iterations, seconds);

        for (size_t i = 0; i < n_corpus; i++) {
                free(corpus[i].name);
                free(corpus[i].p);
        }
        free(corpus);
        return 0;
}
