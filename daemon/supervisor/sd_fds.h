/* SPDX-License-Identifier: MIT */
/*
 * File descriptors lupined inherits at start through the systemd
 * convention: LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES, fds from 3 on.
 * They come from three places:
 *   - socket activation (lupined.socket): listening sockets;
 *   - systemd's fd store (FDSTORE=1, FileDescriptorStoreMax=): whatever
 *     lupined stored before it stopped (hot checkpoint memory, ...);
 *   - lupined re-executing itself for an upgrade, with LISTEN_PID set to
 *     its own pid: listeners, session memory and client connections.
 *
 * lupd_sd_fds_collect() sorts them once: listening stream sockets
 * (SO_ACCEPTCONN, AF_INET, AF_INET6 or AF_UNIX) become the supervisor's
 * listeners; every other fd is kept, with its name, in the inherited list
 * until somebody takes it or lupd_sd_fds_release_unclaimed() closes it.
 * Everything here is for the supervisor's thread; nothing is thread-safe.
 *
 * FD names follow systemd's rules (lupd_sd_fd_name_valid()): 1 to 255
 * printable ASCII characters without ':', which separates names in
 * LISTEN_FDNAMES. Who stores an fd must give it such a name.
 */
#ifndef LUPD_SD_FDS_H
#define LUPD_SD_FDS_H

#include <stdbool.h>
#include <stddef.h>

#define LUPD_SD_FD_NAME_MAX 255

struct lupd_fd_entry {
        int fd;         /* -1 once taken */
        char name[256];
};

/* Called once at supervisor start. Takes LISTEN_FDS
 * (sd_listen_fds_with_names with unset_environment=1, so workers and a
 * re-executed daemon do not see them), sets FD_CLOEXEC on all, and sorts
 * them: listening sockets go to the listener setup; every other fd is
 * kept in an inherited list with its name. An fd number that is not open
 * is skipped with a warning. Returns the number of inherited fds or
 * -errno (-EALREADY on a second call). */
int lupd_sd_fds_collect(void);

/* The listening sockets collected, in the order received. The supervisor
 * owns them from collection on (it closes them at exit). */
size_t lupd_sd_listen_count(void);
int lupd_sd_listen_fd(size_t i);        /* -1 if i is out of range */
const char *lupd_sd_listen_name(size_t i); /* NULL if i is out of range */

/* Inherited fds whose name starts with prefix ("" matches all), in the
 * order received, skipping those taken already. Stores at most max
 * pointers into out and returns how many it stored; with out NULL it
 * stores none and returns how many match. The pointers stay valid until
 * lupd_sd_fds_release_unclaimed(); an entry taken meanwhile reads fd -1.
 * The caller takes ownership of fds it uses by calling lupd_sd_fd_take(). */
size_t lupd_sd_fds_find(const char *prefix, const struct lupd_fd_entry **out, size_t max);

/* Removes the first not yet taken inherited fd called name from the list
 * and returns it (the caller now owns it), or -ENOENT. */
int lupd_sd_fd_take(const char *name);

/* Closes every inherited fd nobody took, and when NOTIFY_SOCKET is set
 * tells the manager FDSTOREREMOVE=1 + FDNAME=<name> for each, with one
 * log line per fd. Called by the supervisor after restore has finished;
 * the list is empty afterwards (a later call does nothing). */
void lupd_sd_fds_release_unclaimed(void);

/* Whether name is a valid fd name: 1 to LUPD_SD_FD_NAME_MAX printable
 * ASCII characters, none of them ':'. */
bool lupd_sd_fd_name_valid(const char *name);

#endif
