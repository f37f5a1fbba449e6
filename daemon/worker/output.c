/* SPDX-License-Identifier: MIT */
/*
 * Device printf, forwarded to the client's stdout.
 *
 * The driver writes a kernel's printf output to the process's standard
 * output when the work is synchronised. In the worker that is a memfd (set
 * up before the driver is loaded), so the driver never blocks on it; before
 * each reply the worker sends whatever arrived there as OUTPUT frames, which
 * land on the client's stdout before the call that flushed them returns,
 * in order with the program's own output.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "worker/session.h"

#define OUTPUT_CHUNK (64u * 1024u)

static bool enabled;
static off_t read_off;

void lupw_output_init(void)
{
        int fd = memfd_create("lupine-gpu-printf", MFD_CLOEXEC);

        if (fd < 0) {
                lup_warn("device printf output stays on the server: memfd_create: %m");
                return;
        }
        fflush(stdout);
        if (dup2(fd, STDOUT_FILENO) < 0) {
                lup_warn("device printf output stays on the server: dup2: %m");
                close(fd);
                return;
        }
        close(fd);
        /* the driver may print through stdio: nothing may sit in a buffer */
        setvbuf(stdout, NULL, _IONBF, 0);
        enabled = true;
}

int lupw_output_forward(struct lupw_session *s)
{
        static uint8_t buf[OUTPUT_CHUNK];
        int rc = 0;

        if (!enabled)
                return 0;
        off_t end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        if (end <= read_off)
                return 0;
        while (read_off < end && rc == 0) {
                size_t want = (size_t)(end - read_off) < sizeof(buf) ? (size_t)(end - read_off) : sizeof(buf);
                ssize_t n = pread(STDOUT_FILENO, buf, want, read_off);
                if (n <= 0)
                        break;
                read_off += n;
                struct lup_hdr h = { .len = (uint32_t)n, .op = LUP_OP_OUTPUT, .ctx = s->last_seq };
                if (LUP_HDR_SIZE + (size_t)n > s->out_cap - s->out_len)
                        rc = lupw_flush_out(s);
                lup_hdr_encode(s->out + s->out_len, &h);
                memcpy(s->out + s->out_len + LUP_HDR_SIZE, buf, (size_t)n);
                s->out_len += LUP_HDR_SIZE + (size_t)n;
        }
        /* all sent: start the file over so it never grows */
        if (read_off >= end && ftruncate(STDOUT_FILENO, 0) == 0 && lseek(STDOUT_FILENO, 0, SEEK_SET) == 0)
                read_off = 0;
        return rc;
}
