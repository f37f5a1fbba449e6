/* SPDX-License-Identifier: MIT */
/* CUDA arrays and texture/surface objects in the worker (worker/arrays.c,
 * worker/arrays_ckpt.c, worker/texobj.c). */
#ifndef LUPD_WORKER_ARRAYS_H
#define LUPD_WORKER_ARRAYS_H

#include "worker/session.h"

/* The live array (kind: levels 0 an array or a level, else a mipmapped
 * array) of that id, or NULL; lupw_array_find also gives one the client
 * destroyed that a live object still names (its checkpoint, its objects'
 * restore). */
struct lupw_array *lupw_array_get(struct lupw_session *s, uint64_t id, bool mipmap);
struct lupw_array *lupw_array_find(struct lupw_session *s, uint64_t id, bool mipmap);
/* Destroys the arrays the client destroyed that no live object names any
 * more (after an object is destroyed). */
void lupw_arrays_reap(struct lupw_session *s);
/* Whether a live texture or surface object names array or mipmapped array
 * id, or a level of it. */
bool lupw_arrays_named(struct lupw_session *s, uint64_t id);
/* Makes a's driver object again from its record (a->real set): for a
 * level, from its mipmapped array, which must be made already. */
CUresult lupw_array_make(struct lupw_session *s, struct lupw_array *a);
/* Enters a (a copy is kept); CUDA_ERROR_OUT_OF_MEMORY past the limit. */
CUresult lupw_array_put(struct lupw_session *s, const struct lupw_array *a);
/* Destroys the arrays and objects made in context ctx (bound), before it
 * is destroyed or reset. */
void lupw_arrays_drop_ctx(struct lupw_session *s, uint64_t ctx);
/* Forgets every array and object (the driver's go with the contexts). */
void lupw_arrays_release(struct lupw_session *s);

/* The objects "arrays" and "array/<id>" (contents) and "texobjs": 0 or -errno. */
int lupw_arrays_save(struct lupw_session *s, struct lupine_ckpt_save *save);
/* Makes the checkpoint's arrays (with their contents) and objects again, the
 * objects under the values they had, else the restore fails: 0 or -errno
 * with why. None in an older checkpoint. */
int lupw_arrays_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen);
/* Re-creates the texture and surface objects in t[0..n) in order, each under
 * its value: 0, or -EIO with why. */
int lupw_texobjs_remake(struct lupw_session *s, const struct lupw_texobj *t, size_t n, char *why, size_t whylen);

#endif
