/* SPDX-License-Identifier: MIT */
/*
 * The caps on uploaded-but-unused bytes (--upload-cap-session,
 * --upload-cap-total; daemon/upload_acct.h, docs/security.md): module
 * images a client uploaded with BLOB frames and no call has used yet.
 */
#ifndef LUPW_UPLOADS_H
#define LUPW_UPLOADS_H

#include <stddef.h>
#include <stdint.h>

struct lupw_session;

/* Reserves n bytes for a new upload under both caps (and the protocol's
 * LUP_MAX_BLOB_BYTES): 0, or -EDQUOT with the reason (naming the flag) in
 * why[cap]. s->obj.blob_bytes counts the session's reserved bytes. */
int lupw_upload_reserve(struct lupw_session *s, uint64_t n, char *why, size_t cap);
/* Gives back what lupw_upload_reserve() took. */
void lupw_upload_unreserve(struct lupw_session *s, uint64_t n);

#endif
