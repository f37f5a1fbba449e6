/* SPDX-License-Identifier: MIT */
/*
 * Inherited fds (LISTEN_FDS): sorting them into listeners and the rest,
 * handing the rest out by name, and releasing what nobody claimed.
 * See supervisor/sd_fds.h for the contract.
 *
 * The state is file-local: there is one set of inherited fds per process,
 * and it is read once, at start, by the supervisor's thread.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include "supervisor/sd_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

struct sd_listener {
        int fd;
        char name[LUPD_SD_FD_NAME_MAX + 1];
};

static struct {
        bool collected;
        struct sd_listener listen[LUPD_MAX_LISTEN];
        size_t n_listen;
        struct lupd_fd_entry *inh;      /* n_inh entries, taken ones have fd -1 */
        size_t n_inh;
} sdf;

bool lupd_sd_fd_name_valid(const char *name)
{
        size_t n = 0;

        if (!name)
                return false;
        for (const char *p = name; *p; p++, n++) {
                if (n >= LUPD_SD_FD_NAME_MAX || *p == ':' || *p < 0x20 || *p > 0x7e)
                        return false;
        }
        return n > 0;
}

/* A listening stream socket of a family the supervisor can serve? */
static bool is_listener(int fd)
{
        int v = 0, family = 0, type = 0;
        socklen_t len = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || !v)
                return false;
        len = sizeof(family);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) < 0)
                return false;
        len = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
                return false;
        return type == SOCK_STREAM && (family == AF_INET || family == AF_INET6 || family == AF_UNIX);
}

static void copy_name(char *dst, const char *src, int fd)
{
        size_t n = src ? strlen(src) : 0;

        if (n > LUPD_SD_FD_NAME_MAX) {
                lup_warn("inherited fd %d: its name is longer than %d characters; cutting it short", fd,
                         LUPD_SD_FD_NAME_MAX);
                n = LUPD_SD_FD_NAME_MAX;
        }
        memcpy(dst, src ? src : "", n);
        dst[n] = 0;
}

int lupd_sd_fds_collect(void)
{
        char **names = NULL;
        int n;

        if (sdf.collected)
                return -EALREADY;
        sdf.collected = true;
        n = sd_listen_fds_with_names(1, &names);
        if (n < 0) {
                lup_err("cannot take the inherited fds (LISTEN_FDS): %s", strerror(-n));
                return n;
        }
        if (n == 0)
                goto out;
        sdf.inh = calloc((size_t)n, sizeof(*sdf.inh));
        if (!sdf.inh) {
                n = -ENOMEM;
                lup_err("cannot take the inherited fds (LISTEN_FDS): out of memory");
                goto out;
        }
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names ? names[i] : "unknown";
                int fl = fcntl(fd, F_GETFD);

                if (fl < 0) {
                        lup_warn("inherited fd %d (%s) is not open; LISTEN_FDS=%d is wrong", fd, name, n);
                        continue;
                }
                if (!(fl & FD_CLOEXEC))
                        (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
                if (is_listener(fd)) {
                        if (sdf.n_listen >= LUPD_MAX_LISTEN) {
                                lup_warn("inherited listening socket %d (%s): at most %d listeners; closing it",
                                         fd, name, LUPD_MAX_LISTEN);
                                close(fd);
                                continue;
                        }
                        sdf.listen[sdf.n_listen].fd = fd;
                        copy_name(sdf.listen[sdf.n_listen].name, name, fd);
                        sdf.n_listen++;
                        continue;
                }
                sdf.inh[sdf.n_inh].fd = fd;
                copy_name(sdf.inh[sdf.n_inh].name, name, fd);
                sdf.n_inh++;
                lup_debug("inherited fd %d (%s)", fd, sdf.inh[sdf.n_inh - 1].name);
        }
        n = (int)sdf.n_inh;
        if (sdf.n_listen || sdf.n_inh)
                lup_info("inherited %zu listening socket(s) and %zu other fd(s) (LISTEN_FDS)", sdf.n_listen,
                         sdf.n_inh);
out:
        if (names) {
                for (char **p = names; *p; p++)
                        free(*p);
                free(names);
        }
        return n;
}

size_t lupd_sd_listen_count(void)
{
        return sdf.n_listen;
}

int lupd_sd_listen_fd(size_t i)
{
        return i < sdf.n_listen ? sdf.listen[i].fd : -1;
}

const char *lupd_sd_listen_name(size_t i)
{
        return i < sdf.n_listen ? sdf.listen[i].name : NULL;
}

size_t lupd_sd_fds_find(const char *prefix, const struct lupd_fd_entry **out, size_t max)
{
        size_t plen = prefix ? strlen(prefix) : 0;
        size_t found = 0;

        for (size_t i = 0; i < sdf.n_inh; i++) {
                const struct lupd_fd_entry *e = &sdf.inh[i];

                if (e->fd < 0 || strncmp(e->name, prefix ? prefix : "", plen) != 0)
                        continue;
                if (out) {
                        if (found >= max)
                                break;
                        out[found] = e;
                }
                found++;
        }
        return found;
}

int lupd_sd_fd_take(const char *name)
{
        if (!name)
                return -ENOENT;
        for (size_t i = 0; i < sdf.n_inh; i++) {
                struct lupd_fd_entry *e = &sdf.inh[i];

                if (e->fd >= 0 && strcmp(e->name, name) == 0) {
                        int fd = e->fd;
                        e->fd = -1;
                        return fd;
                }
        }
        return -ENOENT;
}

void lupd_sd_fds_release_unclaimed(void)
{
        const char *ns = getenv("NOTIFY_SOCKET");
        bool notify = ns && ns[0];

        for (size_t i = 0; i < sdf.n_inh; i++) {
                struct lupd_fd_entry *e = &sdf.inh[i];

                if (e->fd < 0)
                        continue;
                close(e->fd);
                e->fd = -1;
                if (notify && lupd_sd_fd_name_valid(e->name)) {
                        int r = sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", e->name);
                        if (r < 0)
                                lup_warn("inherited fd %s: nobody claimed it; closed it, but cannot tell the "
                                         "service manager to drop its copy: %s",
                                         e->name, strerror(-r));
                        else
                                lup_info("inherited fd %s: nobody claimed it; closed it and removed it from the "
                                         "fd store",
                                         e->name);
                } else {
                        lup_info("inherited fd %s: nobody claimed it; closed it", e->name);
                }
        }
        free(sdf.inh);
        sdf.inh = NULL;
        sdf.n_inh = 0;
}
