/* SPDX-License-Identifier: MIT */
/*
 * The worker keeps no capabilities (docs/security.md, "Privileges").
 * lupined may run as root (in a container) or as the lupine user with
 * capabilities from its unit; either way a worker, which parses a remote
 * client's bytes all day, gives every capability up before it serves:
 * bounding set, ambient, inheritable, permitted, effective, in that order
 * (the bounding set needs CAP_SETPCAP, which the capset takes away), then
 * no_new_privs, so no execve can hand any back. The uid stays: the
 * checkpoint directory and the fd store belong to it.
 *
 * Raw system calls: the GPU hosts have no libcap headers, and these are
 * five calls.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include "worker/privs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* The highest capability number a 64-bit capset can name. */
#define CAP_MAX_V3 63

struct capsets {
        uint64_t eff, prm, inh;
};

static int fail(const char *what, int e)
{
        lup_err("worker: cannot drop its privileges: %s: %s; it refuses to serve the session", what, strerror(e));
        return -e;
}

static int caps_get(struct capsets *ret)
{
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

        memset(d, 0, sizeof(d));
        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        ret->eff = d[0].effective | (uint64_t)d[1].effective << 32;
        ret->prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
        ret->inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
        return 0;
}

static int caps_set(const struct capsets *c)
{
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {
                { .effective = (uint32_t)c->eff, .permitted = (uint32_t)c->prm, .inheritable = (uint32_t)c->inh },
                { .effective = (uint32_t)(c->eff >> 32),
                  .permitted = (uint32_t)(c->prm >> 32),
                  .inheritable = (uint32_t)(c->inh >> 32) },
        };

        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* The kernel's last capability: /proc/sys/kernel/cap_last_cap, then
 * checked against the kernel itself (PR_CAPBSET_READ says EINVAL past
 * it), which also covers a /proc that is not there. */
static int cap_last(void)
{
        char buf[16];
        int last = -1, fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n > 0) {
                        char *end;
                        buf[n] = 0;
                        long v = strtol(buf, &end, 10);
                        if (end != buf && v >= 0 && v <= CAP_MAX_V3)
                                last = (int)v;
                }
        }
        while (last < CAP_MAX_V3 && prctl(PR_CAPBSET_READ, (unsigned long)(last + 1), 0, 0, 0) >= 0)
                last++;
        return last;
}

/* Threads of this process, or -errno when /proc cannot say. */
static int count_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        int n = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* The bounding set: every capability up to last, when the process holds
 * CAP_SETPCAP. Returns how many stay in it (0 with CAP_SETPCAP), or
 * -errno, logged. */
static int drop_bounding(int last, bool may)
{
        int kept = 0;

        for (int c = 0; c <= last; c++) {
                int r = prctl(PR_CAPBSET_READ, (unsigned long)c, 0, 0, 0);
                if (r < 0 && errno == EINVAL)
                        continue;
                if (r < 0)
                        return fail("prctl(PR_CAPBSET_READ)", errno);
                if (r == 0)
                        continue;
                if (!may) {
                        kept++;
                        continue;
                }
                if (prctl(PR_CAPBSET_DROP, (unsigned long)c, 0, 0, 0) < 0)
                        return fail("prctl(PR_CAPBSET_DROP)", errno);
        }
        return kept;
}

/* What the drop must have left: nothing, and no_new_privs. */
static int verify(int last, bool bounding_dropped)
{
        struct capsets c;
        int r = caps_get(&c);

        if (r < 0)
                return fail("capget after the drop", -r);
        if (c.eff || c.prm || c.inh)
                return fail("capabilities are left after capset (effective, permitted or inheritable)", EPERM);
        for (int i = 0; i <= last; i++) {
                r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, (unsigned long)i, 0, 0);
                if (r > 0)
                        return fail("an ambient capability is left", EPERM);
                if (bounding_dropped && prctl(PR_CAPBSET_READ, (unsigned long)i, 0, 0, 0) > 0)
                        return fail("a capability is left in the bounding set", EPERM);
        }
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return fail("no_new_privs is not set", EPERM);
        return 0;
}

int lupw_drop_privileges(void)
{
        struct capsets had, none = { 0 };
        int last = cap_last(), threads = count_threads(), kept, r;

        /* A thread started before this keeps its own capabilities. */
        if (threads > 1) {
                lup_err("worker: cannot drop its privileges: %d threads already run, and capabilities belong to "
                        "each thread; it refuses to serve the session",
                        threads);
                return -EBUSY;
        }
        if (last < 0)
                return fail("the kernel's last capability is unknown", ENOSYS);
        r = caps_get(&had);
        if (r < 0)
                return fail("capget", -r);
        /* CAP_SETPCAP in the permitted set alone still lets it drop the
         * bounding set, once it is effective. */
        if ((had.prm >> CAP_SETPCAP & 1) && !(had.eff >> CAP_SETPCAP & 1)) {
                struct capsets raised = { .eff = had.prm, .prm = had.prm, .inh = had.inh };
                r = caps_set(&raised);
                if (r < 0)
                        return fail("capset (raising the effective set to the permitted one)", -r);
        }
        bool may = had.prm >> CAP_SETPCAP & 1;
        kept = drop_bounding(last, may);
        if (kept < 0)
                return kept;
        /* EINVAL: a kernel before 4.3, which has no ambient set. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return fail("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", errno);
        r = caps_set(&none);
        if (r < 0)
                return fail("capset (all sets empty)", -r);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail("prctl(PR_SET_NO_NEW_PRIVS)", errno);
        r = verify(last, may);
        if (r < 0)
                return r;
        if (kept)
                lup_debug("worker: capabilities dropped (uid %d; it had effective %#llx, permitted %#llx); %d stay in "
                          "the bounding set, which only CAP_SETPCAP may change: no_new_privs keeps execve from "
                          "granting them",
                          (int)getuid(), (unsigned long long)had.eff, (unsigned long long)had.prm, kept);
        else
                lup_debug("worker: capabilities dropped (uid %d; it had effective %#llx, permitted %#llx), the "
                          "bounding set emptied, no_new_privs set",
                          (int)getuid(), (unsigned long long)had.eff, (unsigned long long)had.prm);
        return 0;
}
