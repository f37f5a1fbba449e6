/* SPDX-License-Identifier: MIT */
/*
 * The hot checkpoint's fds, supervisor side (docs/sessions.md, "Hot
 * checkpoint and zero-disconnect upgrade"; docs/operations.md for systemd's
 * fd store; the control messages are in daemon/ctl.h): where the fds a draining
 * worker sends go, and how a restore worker gets them back.
 *
 * Drain. A worker told LUPD_DRAIN_HOT (supervisor/drain.c decides)
 * exports each arena chunk as an fd, which comes back here with
 * LUPD_CTL_HOT_MEM. Memory fds are named
 *
 *     lupine-mem.<session>.<epoch>.<chunk address, hex>
 *
 * (fd names may not hold ':'; session names cannot). On SIGTERM under a
 * service manager each goes to its fd store at once, one fd per message
 * because FDNAME= names every fd of a message; FDPOLL=0, since a device
 * memory fd need not be pollable. During an upgrade they are kept here
 * instead (s->held), with the connections workers hand back
 * (LUPD_CTL_HANDBACK): lupine-conn.<session>.<epoch>, and the part of a
 * frame it had read in a memfd, lupine-input.<session>.<epoch>.
 * supervisor/upgrade.c passes them on to the next image.
 *
 * Restore. For each committed session, the fds named for its newest epoch
 * are taken from the inherited list and sent to its restore worker, which
 * was started with --hot (LUPD_CTL_HOT_MAP, CONN, HOT_END). They are then
 * removed from the fd store (FDSTOREREMOVE=1): the worker's imported
 * handles hold the memory now, and when its session ends the memory is
 * freed. Fds nobody claims (older epochs, sessions whose checkpoint is
 * gone) are closed and removed by lupd_sd_fds_release_unclaimed().
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

/* How long a restore worker gets to take its fds off the control socket. */
#define HOT_SEND_TIMEOUT_S 30

bool sup_have_fd_store(void)
{
        const char *e = getenv("NOTIFY_SOCKET");

        return e && e[0];
}

void sup_raise_nofile(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* ---- drain: the fds workers send */

static int held_add(struct sup *s, const char *name, int fd)
{
        if (s->n_held == s->cap_held) {
                size_t cap = s->cap_held ? s->cap_held * 2 : 64;
                struct sup_held *v = realloc(s->held, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->held = v;
                s->cap_held = cap;
        }
        s->held[s->n_held].fd = fd;
        snprintf(s->held[s->n_held].name, sizeof(s->held[0].name), "%s", name);
        s->n_held++;
        return 0;
}

/* One fd into the service manager's fd store, under its own name. */
int sup_fdstore_push(const char *name, int fd)
{
        char msg[LUPD_SD_FD_NAME_MAX + 64];
        int r;

        snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
        r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
        if (r == 0)
                return -ENOENT; /* no NOTIFY_SOCKET */
        return r < 0 ? r : 0;
}

void sup_hot_on_mem(struct sup *s, int idx, uint64_t epoch, const uint8_t *recs, int *fds, int n)
{
        struct lupd_session *se = &s->reg.s[idx];
        int stored = 0, failed = 0, first_err = 0;

        for (int i = 0; i < n; i++) {
                uint64_t addr = lup_le64(recs + (size_t)i * LUPD_CTL_HOT_MEM_REC);
                uint64_t size = lup_le64(recs + (size_t)i * LUPD_CTL_HOT_MEM_REC + 8);
                char name[LUPD_SD_FD_NAME_MAX + 1];
                int r;

                snprintf(name, sizeof(name), "lupine-mem.%s.%" PRIu64 ".%" PRIx64, se->name, epoch, addr);
                if (s->upgrade) {
                        r = held_add(s, name, fds[i]);
                        if (r == 0)
                                fds[i] = -1;
                } else {
                        r = sup_fdstore_push(name, fds[i]);
                }
                if (r < 0) {
                        failed++;
                        if (!first_err)
                                first_err = r;
                } else {
                        stored++;
                        se->hot_bytes += size;
                }
                if (fds[i] >= 0)
                        close(fds[i]);
        }
        se->hot_fds += (uint64_t)stored;
        if (failed)
                lup_err("session %s: %d memory fd(s) could not be %s (%s); that memory survives only in the durable "
                        "copy, if the checkpoint mode wrote one",
                        se->name, failed, s->upgrade ? "kept" : "stored in the fd store", strerror(-first_err));
}

void sup_hot_on_handback(struct sup *s, int idx, uint64_t epoch, uint64_t seq, uint32_t input_len, int conn_fd,
                         int input_fd)
{
        struct lupd_session *se = &s->reg.s[idx];
        char name[LUPD_SD_FD_NAME_MAX + 1];

        snprintf(name, sizeof(name), "lupine-conn.%s.%" PRIu64, se->name, epoch);
        if (held_add(s, name, conn_fd) < 0) {
                lup_err("session %s: out of memory keeping its connection; the client will reconnect", se->name);
                close(conn_fd);
                if (input_fd >= 0)
                        close(input_fd);
                return;
        }
        if (input_fd >= 0) {
                snprintf(name, sizeof(name), "lupine-input.%s.%" PRIu64, se->name, epoch);
                if (held_add(s, name, input_fd) < 0) {
                        /* without the bytes it had read the stream is broken */
                        s->n_held--;
                        close(conn_fd);
                        close(input_fd);
                        lup_err("session %s: out of memory keeping its connection; the client will reconnect",
                                se->name);
                        return;
                }
        }
        lup_info("session %s: connection kept for the upgrade at seq %" PRIu64 " (%u bytes of a frame in part)",
                 se->name, seq, input_len);
}

void sup_hot_free(struct sup *s)
{
        for (size_t i = 0; i < s->n_held; i++)
                if (s->held[i].fd >= 0)
                        close(s->held[i].fd);
        free(s->held);
        s->held = NULL;
        s->n_held = s->cap_held = 0;
}

/* ---- restore */

static void mem_prefix(char *buf, size_t cap, const char *name, uint64_t epoch)
{
        snprintf(buf, cap, "lupine-mem.%s.%" PRIu64 ".", name, epoch);
}

bool sup_hot_restore_wanted(const char *name, uint64_t epoch)
{
        char p[LUPD_SD_FD_NAME_MAX + 1];

        mem_prefix(p, sizeof(p), name, epoch);
        if (lupd_sd_fds_find(p, NULL, 0) > 0)
                return true;
        snprintf(p, sizeof(p), "lupine-conn.%s.%" PRIu64, name, epoch);
        return lupd_sd_fds_find(p, NULL, 0) > 0;
}

/* The chunk address at the end of a memory fd's name: 1 to 16 hex digits. */
static int parse_addr(const char *s, uint64_t *ret)
{
        uint64_t v = 0;
        size_t n = 0;

        for (; s[n]; n++) {
                char c = s[n];
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (d < 0 || n >= 16)
                        return -EINVAL;
                v = v << 4 | (uint64_t)d;
        }
        if (n == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static void forget_stored(const char *name)
{
        if (sup_have_fd_store())
                sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);
}

static int send_msg(int sock, const uint8_t *msg, size_t len, const int *fds, int nfds)
{
        return lup_send_fds(sock, msg, len, fds, nfds);
}

int sup_hot_restore_send(struct sup *s, int idx, uint64_t epoch)
{
        struct lupd_session *se = &s->reg.s[idx];
        char prefix[LUPD_SD_FD_NAME_MAX + 1], name[LUPD_SD_FD_NAME_MAX + 1];
        const struct lupd_fd_entry **ents = NULL;
        uint8_t msg[LUPD_CTL_HOT_MAP_FIXED + LUPD_CTL_MAX_FDS * 8];
        int fds[LUPD_CTL_MAX_FDS];
        struct timeval tv = { .tv_sec = HOT_SEND_TIMEOUT_S };
        size_t n, sent = 0, bad = 0;
        int nb = 0, r = 0, conn, input;

        mem_prefix(prefix, sizeof(prefix), se->name, epoch);
        (void)setsockopt(se->ctl_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        n = lupd_sd_fds_find(prefix, NULL, 0);
        if (n) {
                ents = calloc(n, sizeof(*ents));
                if (!ents)
                        return -ENOMEM;
                n = lupd_sd_fds_find(prefix, ents, n);
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                uint64_t addr;
                int fd;

                snprintf(name, sizeof(name), "%s", ents[i]->name);
                if (parse_addr(name + strlen(prefix), &addr) < 0) {
                        bad++;
                        continue; /* not ours to judge: released with the unclaimed */
                }
                fd = lupd_sd_fd_take(name);
                if (fd < 0)
                        continue;
                forget_stored(name);
                if (nb == 0) {
                        lup_put32(msg, LUPD_CTL_HOT_MAP);
                        lup_put64(msg + 8, epoch);
                }
                lup_put64(msg + LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, addr);
                fds[nb++] = fd;
                if (nb == (int)LUPD_CTL_MAX_FDS || i + 1 == n) {
                        lup_put32(msg + 4, (uint32_t)nb);
                        r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, fds, nb);
                        for (int j = 0; j < nb; j++)
                                close(fds[j]);
                        if (r == 0)
                                sent += (size_t)nb;
                        nb = 0;
                }
        }
        if (nb > 0) { /* the last names did not parse: what was gathered still goes */
                lup_put32(msg + 4, (uint32_t)nb);
                if (r == 0)
                        r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, fds, nb);
                for (int j = 0; j < nb; j++)
                        close(fds[j]);
                if (r == 0)
                        sent += (size_t)nb;
        }
        free(ents);
        if (bad)
                lup_warn("session %s: %zu inherited fd(s) named %s... have no chunk address; not used", se->name, bad,
                         prefix);

        snprintf(name, sizeof(name), "lupine-conn.%s.%" PRIu64, se->name, epoch);
        conn = lupd_sd_fd_take(name);
        snprintf(name, sizeof(name), "lupine-input.%s.%" PRIu64, se->name, epoch);
        input = lupd_sd_fd_take(name);
        if (conn >= 0 && r == 0) {
                struct stat st;
                int cf[2] = { conn, input };
                uint32_t in_len = 0;

                if (input >= 0 && fstat(input, &st) == 0 && st.st_size > 0 &&
                    st.st_size <= LUP_MAX_PAYLOAD + LUP_HDR_SIZE)
                        in_len = (uint32_t)st.st_size;
                lup_put32(msg, LUPD_CTL_CONN);
                lup_put32(msg + 4, in_len);
                lup_put64(msg + 8, epoch);
                r = send_msg(se->ctl_fd, msg, LUPD_CTL_CONN_LEN, cf, in_len ? 2 : 1);
                if (r == 0)
                        se->hot_conn = true;
        }
        if (conn >= 0)
                close(conn);
        if (input >= 0)
                close(input);
        if (r == 0) {
                lup_put32(msg, LUPD_CTL_HOT_END);
                lup_put32(msg + 4, (uint32_t)sent);
                lup_put64(msg + 8, epoch);
                r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_END_LEN, NULL, 0);
        }
        if (r < 0) {
                lup_err("session %s: cannot hand its memory fds to restore worker %d: %s", se->name, (int)se->pid,
                        strerror(-r));
                return r;
        }
        lup_info("session %s: hot restore: %zu memory fd(s)%s handed to worker %d", se->name, sent,
                 se->hot_conn ? " and the client connection" : "", (int)se->pid);
        return 0;
}
