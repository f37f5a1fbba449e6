/* SPDX-License-Identifier: MIT */
/*
 * What every ADMIN command shares: the reply frame, and the words STATUS
 * and the metrics use for a session's phase.
 */
#define LUP_LOG_CAT LUP_LOGC_ADMIN
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "admin.h"
#include "supervisor/internal.h"

/* The reply frame: status 0 and the text. Returns 0 or -errno. */
int sup_admin_reply(const struct conn *c, const char *text, size_t n)
{
        size_t len;
        uint8_t *frame;
        ssize_t k;
        int r;

        if (n > LUP_ADMIN_MAX_TEXT)
                return -EMSGSIZE;
        frame = malloc(LUP_ADMIN_REPLY_SIZE(n));
        if (!frame)
                return -ENOMEM;
        r = lup_admin_reply_encode(frame, LUP_ADMIN_REPLY_SIZE(n), &c->hdr, 0, text, n, &len);
        if (r < 0)
                goto out_free;
        /* At most 64 KiB into a fresh UNIX socket, whose send buffer is
         * larger; MSG_DONTWAIT makes sure a peer that does not read can
         * never stall the loop. */
        k = send(c->fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0)
                r = -errno;
        else if ((size_t)k != len)
                r = -EAGAIN;
out_free:
        free(frame);
        return r;
}

const char *sup_admin_state_name(enum lupd_session_phase phase)
{
        switch (phase) {
        case LUPD_PHASE_STARTING:
                return "starting";
        case LUPD_PHASE_RESTORING:
                return "restoring";
        case LUPD_PHASE_SERVING:
                return "serving";
        case LUPD_PHASE_DETACHED:
                return "detached";
        case LUPD_PHASE_WAITING:
                return "restored-waiting";
        case LUPD_PHASE_FAILED:
                return "failed";
        }
        return "unknown";
}
