/* SPDX-License-Identifier: MIT */
/*
 * lupinectl log [-n N] [--level L] [--session S] [-f] [--file PATH]: the
 * daemon's log. Where it is comes from lupined itself (CONFIG_SHOW's
 * log_target and log_file): the journal when lupined logs there
 * (ctl_log_journal.c), otherwise the file of its --log-file. When lupined
 * does not answer, the journal if it holds lupined's entries. --file reads
 * a file directly, --journal-dir a directory of journal files.
 *
 * The file is read backwards to find where the last N matching lines
 * start (so a big file costs what N lines cost), then forwards from there;
 * -f then polls it for growth, starts again from the top when it shrank
 * (logrotate's copytruncate) and follows a new file put at its path.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cli/ctl_log.h"
#include "cli/lupinectl.h"
#include "frame.h"
#include "lupine/wire.h"

#define CHUNK     (256u * 1024u) /* read at once; a longer line is skipped */
#define MAX_LINES 100000000L
#define POLL_MS   200
#define DEFAULT_N 50

/* One line [p, p+n): whether it passes the filters; *e holds it. */
static bool line_matches(const struct ctl_log_args *a, const char *p, size_t n, struct lup_log_line *e)
{
        if (lup_log_line_parse(p, n, e) < 0) {
                memset(e, 0, sizeof(*e));
                e->level = -1;
                e->cuda_error = -1;
                if (n >= sizeof(e->msg))
                        n = sizeof(e->msg) - 1;
                memcpy(e->msg, p, n);
        }
        return ctl_log_match(a, e);
}

/* Prints the matching complete lines of [*off, to); *off ends after the
 * last complete line (a line still being written waits for the next call). */
static int print_range(int fd, off_t *off, off_t to, const struct ctl_log_args *a, char *buf)
{
        struct lup_log_line e;

        while (*off < to) {
                size_t want = (size_t)(to - *off) < CHUNK ? (size_t)(to - *off) : CHUNK;
                ssize_t r = pread(fd, buf, want, *off);
                if (r < 0)
                        return -errno;
                if (r == 0)
                        break;
                size_t start = 0;
                for (size_t i = 0; i < (size_t)r; i++) {
                        if (buf[i] != '\n')
                                continue;
                        if (line_matches(a, buf + start, i - start, &e))
                                ctl_log_print(stdout, a, &e);
                        start = i + 1;
                }
                /* only a line in progress: it waits; a line longer than CHUNK is skipped */
                if (start == 0 && (size_t)r < CHUNK)
                        break;
                *off += start ? (off_t)start : r;
        }
        return 0;
}

/* Where the last a->lines matching lines of [0, end) start (end is just
 * after a newline): read backwards, CHUNK at a time, each chunk ending
 * where a line starts. A line longer than CHUNK is skipped. */
static off_t tail_start(int fd, off_t end, const struct ctl_log_args *a, char *buf)
{
        struct lup_log_line e;
        off_t pos = end;
        bool skipping = false; /* pos is inside a line longer than CHUNK */
        long found = 0;

        if (a->lines <= 0)
                return end;
        while (pos > 0) {
                off_t s = pos > (off_t)CHUNK ? pos - (off_t)CHUNK : 0;
                size_t n = (size_t)(pos - s);
                if (pread(fd, buf, n, s) != (ssize_t)n)
                        return 0;
                /* unless skipping, buf[n - 1] is the newline of the line before pos */
                size_t top = skipping ? n : n - 1, line_end = top;
                for (size_t i = top; i > 0; i--) {
                        if (buf[i - 1] != '\n')
                                continue;
                        if (!skipping && line_matches(a, buf + i, line_end - i, &e) && ++found == a->lines)
                                return s + (off_t)i;
                        skipping = false;
                        line_end = i - 1;
                }
                if (s == 0)
                        return 0; /* the first line: whether it matches or not, start there */
                if (line_end == top) {
                        pos = s;
                        skipping = true;
                        continue;
                }
                pos = s + (off_t)line_end + 1;
        }
        return 0;
}

/* The offset just after the file's last newline (a line may be in progress). */
static off_t complete_end(int fd, off_t size, char *buf)
{
        off_t pos = size;

        while (pos > 0) {
                off_t s = pos > (off_t)CHUNK ? pos - (off_t)CHUNK : 0;
                size_t n = (size_t)(pos - s);
                if (pread(fd, buf, n, s) != (ssize_t)n)
                        return 0;
                for (size_t i = n; i > 0; i--)
                        if (buf[i - 1] == '\n')
                                return s + (off_t)i;
                pos = s;
        }
        return 0;
}

/* -f: new lines as they come, until Ctrl-C. */
static int follow_file(const char *path, int fd, off_t off, const struct ctl_log_args *a, char *buf)
{
        struct timespec ts = { .tv_nsec = POLL_MS * 1000000L };

        for (;;) {
                struct stat st, now;
                if (fstat(fd, &st) < 0)
                        return -errno;
                if (st.st_size < off) {
                        fprintf(stderr, "lupinectl: %s was truncated; reading it from the start\n", path);
                        off = 0;
                }
                int r = print_range(fd, &off, st.st_size, a, buf);
                if (r < 0)
                        return r;
                fflush(stdout);
                /* rotated away (renamed, a new file in its place), and the old one read to its end */
                if (off >= st.st_size && stat(path, &now) == 0 &&
                    (now.st_ino != st.st_ino || now.st_dev != st.st_dev)) {
                        int nfd = open(path, O_RDONLY | O_CLOEXEC);
                        if (nfd >= 0) {
                                close(fd);
                                fd = nfd;
                                off = 0;
                                continue;
                        }
                }
                nanosleep(&ts, NULL);
        }
}

static int log_file(const char *path, const struct ctl_log_args *a)
{
        struct stat st;
        char *buf;
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "lupinectl: cannot open the log file %s: %s\n", path, strerror(errno));
                return 1;
        }
        buf = malloc(CHUNK);
        if (!buf || fstat(fd, &st) < 0) {
                fprintf(stderr, "lupinectl: %s: %s\n", path, buf ? strerror(errno) : "out of memory");
                free(buf);
                close(fd);
                return 1;
        }
        off_t end = complete_end(fd, st.st_size, buf);
        off_t off = tail_start(fd, end, a, buf);
        r = print_range(fd, &off, end, a, buf);
        fflush(stdout);
        if (r == 0 && a->follow)
                r = follow_file(path, fd, off, a, buf); /* returns only on an error */
        if (r < 0)
                fprintf(stderr, "lupinectl: reading %s: %s\n", path, strerror(-r));
        free(buf);
        close(fd);
        return r < 0 ? 1 : 0;
}

/* Asks lupined where it logs: 0 with *ret_target ("journal", "stderr" or
 * "" from a lupined too old to say) and *ret_file (malloc'd, or NULL), or
 * -1 when it did not answer (ctl_call said why). */
static int ask_daemon(const struct ctl_opts *o, char *ret_target, size_t cap, char **ret_file)
{
        struct json_object *top, *v;
        uint32_t status;
        char *text;

        if (ctl_call(o, LUP_ADMIN_CONFIG_SHOW, NULL, &status, &text) < 0)
                return -1;
        top = status == 0 ? json_tokener_parse(text) : NULL;
        if (status != 0)
                fprintf(stderr, "lupinectl: lupined refused to show its settings: %s\n", text);
        free(text);
        if (!top)
                return -1;
        ret_target[0] = 0;
        *ret_file = NULL;
        if (json_object_object_get_ex(top, "log_target", &v) && json_object_is_type(v, json_type_string))
                snprintf(ret_target, cap, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(top, "log_file", &v) && json_object_is_type(v, json_type_string))
                *ret_file = strdup(json_object_get_string(v));
        json_object_put(top);
        return 0;
}

static int pick_source(const struct ctl_opts *o, struct ctl_log_args *a)
{
        char target[32], *file = NULL;

        if (ask_daemon(o, target, sizeof(target), &file) < 0) {
                if (ctl_log_journal_has_entries(a)) {
                        fprintf(stderr, "lupinectl: lupined does not answer; its entries in the journal:\n");
                        return ctl_log_journal(a);
                }
                fprintf(stderr, "lupinectl: lupined does not answer and the journal has no entries of it; name "
                                "its log file with --file PATH\n");
                return 1;
        }
        if (strcmp(target, "journal") == 0 || (!target[0] && !file && ctl_log_journal_has_entries(a))) {
                free(file);
                return ctl_log_journal(a);
        }
        if (file) {
                int r = log_file(file, a);
                free(file);
                return r;
        }
        fprintf(stderr, "lupinectl: lupined logs to stderr only (it does not run under systemd's journal and was "
                        "started without --log-file): there is no log to read. Run it under systemd (its entries "
                        "go to the journal), or start it with --log-file PATH.\n");
        return 1;
}

static int parse_lines(const char *s, long *ret)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (!*s || *end || errno || v < 0 || v > MAX_LINES)
                return -1;
        *ret = v;
        return 0;
}

int ctl_log(const struct ctl_opts *o, int argc, char **argv)
{
        enum {
                OPT_LEVEL = 0x100,
                OPT_SESSION,
                OPT_FILE,
                OPT_JOURNAL_DIR
        };
        static const struct option opts[] = {
                { "lines", required_argument, NULL, 'n' },
                { "level", required_argument, NULL, OPT_LEVEL },
                { "session", required_argument, NULL, OPT_SESSION },
                { "follow", no_argument, NULL, 'f' },
                { "file", required_argument, NULL, OPT_FILE },
                { "journal-dir", required_argument, NULL, OPT_JOURNAL_DIR },
                { "json", no_argument, NULL, 'j' },
                {},
        };
        struct ctl_log_args a = { .lines = DEFAULT_N, .max_level = 7, .json = o->json, .color = o->color };
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "+n:fj", opts, NULL)) != -1) {
                switch (c) {
                case 'n':
                        if (parse_lines(optarg, &a.lines) < 0) {
                                fprintf(stderr, "lupinectl: log -n %s: expected a number of entries\n", optarg);
                                return 2;
                        }
                        break;
                case OPT_LEVEL:
                        a.max_level = lup_log_level_parse(optarg, strlen(optarg));
                        if (a.max_level < 0) {
                                fprintf(stderr,
                                        "lupinectl: log --level %s: expected err, warning, notice, info, "
                                        "debug or 0-7\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_SESSION:
                        if (!lup_session_name_valid(optarg, strlen(optarg))) {
                                fprintf(stderr, "lupinectl: log --session %s: not a session name\n", optarg);
                                return 2;
                        }
                        a.session = optarg;
                        break;
                case 'f':
                        a.follow = true;
                        break;
                case OPT_FILE:
                        a.file = optarg;
                        break;
                case OPT_JOURNAL_DIR:
                        a.journal_dir = optarg;
                        break;
                case 'j':
                        a.json = true;
                        break;
                default:
                        fprintf(stderr, "Try 'lupinectl --help'.\n");
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "lupinectl: log: unexpected argument '%s'\nTry 'lupinectl --help'.\n", argv[optind]);
                return 2;
        }
        if (a.file && a.journal_dir) {
                fprintf(stderr, "lupinectl: log: --file and --journal-dir exclude each other\n");
                return 2;
        }
        if (a.json)
                a.color = false;
        if (a.file)
                return log_file(a.file, &a);
        if (a.journal_dir)
                return ctl_log_journal(&a);
        return pick_source(o, &a);
}
