/* SPDX-License-Identifier: MIT */
/*
 * The clients' byte transport (libcuda.so.1, libnvidia-ml.so.1, lupinectl): one
 * connection to lupined, a plain socket or TLS 1.3 (tls://HOST:PORT,
 * docs/tls.md) through common/tls.c. On a plain socket every call is the
 * system call the shim made before (read, recv MSG_DONTWAIT, sendmsg), so
 * plaintext behaviour and speed are unchanged; under TLS the socket is
 * non-blocking and the same blocking and timeout semantics are made on top:
 * a read or write that can move no byte for io_ms gives -EAGAIN, as a
 * plain socket does with SO_RCVTIMEO / SO_SNDTIMEO.
 *
 * One thread may read while another writes (the shim's reader role and its
 * senders); writers must be serialised, as on a plain socket. A TLS write
 * that returned -EAGAIN has its record half-sent inside OpenSSL: the next
 * write on that link must present the same bytes again (callers retry the
 * same iovec, which they do anyway), or the link must be closed.
 *
 * SIGPIPE: OpenSSL writes to the socket with write(2), which raises SIGPIPE
 * when the peer is gone; every TLS call here blocks it in the calling thread
 * and discards the one it raised, as MSG_NOSIGNAL does for plain sends.
 *
 * Functions return -errno; a TLS failure is -EPROTO and lupt_why() says
 * what went wrong, in words.
 */
#ifndef LUPT_TRANSPORT_H
#define LUPT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "lupine/wire.h"
#include "net.h"

struct lup_tls;
struct lup_tls_ctx;

#define LUPT_RECORD 16384u              /* the most plaintext one TLS record carries */
#define LUPT_BATCH  (64u * LUPT_RECORD) /* the most one TLS send seals at once (common/tls_record.c) */

struct lupt_link {
        int fd;              /* -1: none */
        struct lup_tls *tls; /* NULL: a plain socket */
        int io_ms;           /* TLS: how long one read or write may wait for a byte (0: for ever) */
        uint8_t *stage;      /* TLS: small pieces gathered into one record (LUPT_RECORD bytes) */
};

/* The client's settings, read once from the environment (docs/running.md). */
struct lupt_config {
        char *ca, *cert, *key;       /* LUPINE_TLS_CA, _CERT, _KEY; NULL when unset */
        uint8_t token[LUP_MAX_AUTH]; /* LUPINE_TOKEN or the first line of LUPINE_TOKEN_FILE */
        uint16_t token_len;          /* 0: none */
        /* Made when LUPINE_SERVER names a tls:// endpoint. first: the first
         * (or only) handshake of a connection; second: the worker's, after a
         * hand-off. The first has no kernel TLS when a hand-off follows: the
         * kernel's TLS state cannot be taken off a socket again. */
        struct lup_tls_ctx *first, *second;
};

enum lupt_config_flags {
        LUPT_CFG_TOKEN = 0x1,   /* read LUPINE_TOKEN / LUPINE_TOKEN_FILE */
        LUPT_CFG_HANDOFF = 0x2, /* connections go on to a worker (libcuda); NVML's do not */
};

/* Reads the environment into *c; servers is LUPINE_SERVER's list (the TLS
 * contexts are made only when one of them is tls://). 0, or -EINVAL with a
 * sentence in err (naming the variable or file, never the token). */
int lupt_config_load(struct lupt_config *c, const char *servers, unsigned flags, char *err, size_t errcap);
void lupt_config_free(struct lupt_config *c);

/* TCP or UNIX connect, then for tls:// the first handshake, within
 * handshake_ms. Returns the fd (>= 0) with *ret set up, or -errno with
 * err saying why (the endpoint named). */
int lupt_connect(const struct lupt_config *c, const struct lup_endpoint *ep, int handshake_ms, struct lupt_link *ret,
                 char *err, size_t errcap);
/* Frees the TLS state (close_notify: send the closure alert first, best
 * effort) and closes the fd. */
void lupt_close(struct lupt_link *l, bool close_notify);
/* Bounds every wait of a read or a write (0: none), like SO_RCVTIMEO and
 * SO_SNDTIMEO (which it sets on a plain socket). */
void lupt_set_timeout(struct lupt_link *l, int ms);

/* The HELLO exchange's transport part: writes the HELLO frame (header and
 * payload in frame, n bytes) and reads the answer's header into *ret_h and
 * its payload into *ret_p (malloc'ed, the caller frees it). On a TLS
 * connection with a hand-off, a HANDOFF answer is followed here: second
 * handshake, the ticket sent back, and the answer read is then the worker's
 * HELLO reply. 0, or -errno with err saying why: -EPROTO for an answer
 * that is not lupine's protocol, -EAGAIN for no answer within io_ms. */
int lupt_hello(const struct lupt_config *c, const struct lup_endpoint *ep, struct lupt_link *l, const uint8_t *frame,
               size_t n, int handshake_ms, struct lup_hdr *ret_h, uint8_t **ret_p, char *err, size_t errcap);

/* Up to n bytes, waiting up to io_ms for the first: > 0, 0 at the end of
 * the stream, -EAGAIN when none came, -errno. */
ssize_t lupt_read(struct lupt_link *l, void *p, size_t n);
/* The same, never waiting (-EAGAIN: nothing there now). */
ssize_t lupt_recv_nb(struct lupt_link *l, void *p, size_t n);
/* Exactly n bytes: 0, -ECONNRESET at the end of the stream, -EAGAIN past
 * io_ms without a byte. */
int lupt_read_full(struct lupt_link *l, void *p, size_t n);
/* Whether a read would return at once: bytes TLS holds, or the socket. */
bool lupt_readable(struct lupt_link *l);

/* Moves some bytes of iov (at least one): the count, -EAGAIN when none
 * could move within io_ms (at once with nowait), or -errno. With TLS,
 * "moved" means sealed: see lupt_unsent. An empty iov only sends what is
 * unsent (0 once nothing is). */
ssize_t lupt_send(struct lupt_link *l, const struct iovec *iov, int iovcnt, bool nowait);
/* All of it, waiting as needed: 0, -EAGAIN after io_ms without progress. */
int lupt_write_full(struct lupt_link *l, const void *p, size_t n);
/* TLS: bytes lupt_send took that are still in the send buffer because the
 * socket was full. They go out with the next lupt_send (an empty iov is
 * enough); a sender that is done loops until this is false. */
bool lupt_unsent(struct lupt_link *l);
/* A GOODBYE frame of sequence number seq, best effort: written without
 * waiting, and (TLS) one more try for what the socket did not take. */
void lupt_send_goodbye(struct lupt_link *l, uint64_t seq);

/* The TLS reason of the last failure on l ("" for a plain socket). */
const char *lupt_why(const struct lupt_link *l);

#endif
