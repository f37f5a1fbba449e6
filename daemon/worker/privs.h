/* SPDX-License-Identifier: MIT */
/* The worker's privileges: what it gives up before it serves anyone. */
#ifndef LUPW_PRIVS_H
#define LUPW_PRIVS_H

/*
 * Drops every capability of the calling process for good, and sets
 * no_new_privs: the bounding set (when the process may change it: that
 * takes CAP_SETPCAP, and without it no_new_privs makes the bounding set
 * moot), the ambient, inheritable, permitted and effective sets. The uid
 * and gids stay as they are. Capabilities belong to each thread, so this
 * must run while the process has one thread: it refuses (-EBUSY)
 * otherwise. Checks the result. Returns 0, or -errno with the reason
 * logged; a worker that gets an error must not serve the session.
 */
int lupw_drop_privileges(void);

#endif
