/* SPDX-License-Identifier: MIT */
/* CUDA array descriptors and array copies (cuarray.h says what is checked). */
#include "cuarray.h"

#include <errno.h>

#include "buf.h"

/* The device limits of every GPU lupine serves today (H100/H200: the
 * CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE*, SURFACE* attributes). */
#define MAX_1D         131072u
#define MAX_2D_W       131072u
#define MAX_2D_H       65536u
#define MAX_3D         16384u
#define MAX_3D_ALT_WH  8192u  /* ... or this wide and high */
#define MAX_3D_ALT_D   32768u /* ... and this deep (the _ALTERNATE attributes) */
#define MAX_LAYERED_W  32768u
#define MAX_LAYERS     2048u
#define MAX_CUBE_W     32768u
#define MAX_CUBE_LAYER 2046u /* cubemap layers x 6 faces */

uint32_t lup_array_elem_size(uint32_t format, uint32_t channels)
{
        uint32_t per;
        switch (format) {
        case 0x01: /* UNSIGNED_INT8 */
        case 0x08: /* SIGNED_INT8 */
                per = 1;
                break;
        case 0x02: /* UNSIGNED_INT16 */
        case 0x09: /* SIGNED_INT16 */
        case 0x10: /* HALF */
                per = 2;
                break;
        case 0x03: /* UNSIGNED_INT32 */
        case 0x0a: /* SIGNED_INT32 */
        case 0x20: /* FLOAT */
                per = 4;
                break;
        default:
                return 0;
        }
        return channels == 1 || channels == 2 || channels == 4 ? per * channels : 0;
}

/* formats the driver knows that lupine does not forward */
static bool format_known_elsewhere(uint32_t f)
{
        return f == 0x50 || (f >= 0x91 && f <= 0xb5) || (f >= 0xc0 && f <= 0xcb);
}

static int shape_check(const struct lup_array_desc *d, const char **why)
{
        uint64_t w = d->width, h = d->height, z = d->depth;
        bool layered = d->flags & LUP_ARRAY_LAYERED, cube = d->flags & LUP_ARRAY_CUBEMAP;
        *why = "array extent out of range";
        if (w == 0)
                return -EINVAL;
        if (cube) {
                *why = "cubemap arrays need width == height and a depth of 6 (a multiple of 6 when layered)";
                if (w != h || w > MAX_CUBE_W || z == 0 || z % 6 || (!layered && z != 6) || z / 6 > MAX_CUBE_LAYER)
                        return -EINVAL;
                return 0;
        }
        if (layered) {
                *why = "layered arrays need 1 to 2048 layers (depth) and extents within the layered limits";
                if (z == 0 || z > MAX_LAYERS || w > MAX_LAYERED_W || h > MAX_LAYERED_W)
                        return -EINVAL;
                return 0;
        }
        if (h == 0 && z == 0)
                return w <= MAX_1D ? 0 : -EINVAL;
        if (h == 0)
                return -EINVAL; /* a depth needs a height */
        if (z == 0)
                return w <= MAX_2D_W && h <= MAX_2D_H ? 0 : -EINVAL;
        if (w <= MAX_3D && h <= MAX_3D && z <= MAX_3D)
                return 0;
        return w <= MAX_3D_ALT_WH && h <= MAX_3D_ALT_WH && z <= MAX_3D_ALT_D ? 0 : -EINVAL;
}

struct lup_array_shape lup_array_shape_of(const struct lup_array_desc *d)
{
        struct lup_array_shape s = { .elem = lup_array_elem_size(d->format, d->channels) };
        s.row_bytes = d->width * s.elem;
        s.rows = d->height ? d->height : 1;
        s.slices = d->depth ? d->depth : 1;
        s.bytes = s.row_bytes * s.rows * s.slices;
        return s;
}

struct lup_array_desc lup_array_level_desc(const struct lup_array_desc *d, uint32_t level)
{
        struct lup_array_desc l = *d;
        bool keep_depth = d->flags & (LUP_ARRAY_LAYERED | LUP_ARRAY_CUBEMAP);
        l.width = d->width >> level ? d->width >> level : 1;
        if (d->height)
                l.height = d->height >> level ? d->height >> level : 1;
        if (d->depth && !keep_depth)
                l.depth = d->depth >> level ? d->depth >> level : 1;
        return l;
}

int lup_array_check(const struct lup_array_desc *d, uint32_t levels, struct lup_array_shape *ret, const char **ret_why)
{
        const char *why = "unknown array flags";
        int rc = -EINVAL;
        if (d->flags & ~LUP_ARRAY_KNOWN_FLAGS)
                goto out;
        why = "sparse and deferred-mapping arrays are not supported by lupine";
        if (d->flags & (LUP_ARRAY_SPARSE | LUP_ARRAY_DEFERRED)) {
                rc = -ENOTSUP;
                goto out;
        }
        why = "unknown array format";
        if (!lup_array_elem_size(d->format, 1)) {
                if (format_known_elsewhere(d->format)) {
                        why = "planar, packed-video and block-compressed array formats are not supported by lupine";
                        rc = -ENOTSUP;
                }
                goto out;
        }
        why = "array channel count must be 1, 2 or 4";
        if (!lup_array_elem_size(d->format, d->channels))
                goto out;
        if ((rc = shape_check(d, &why)) < 0)
                goto out;
        why = "too many mipmap levels";
        rc = -EINVAL;
        if (levels > LUP_MAX_MIP_LEVELS)
                goto out;
        uint64_t top = d->width > d->height ? d->width : d->height;
        if (!(d->flags & (LUP_ARRAY_LAYERED | LUP_ARRAY_CUBEMAP)) && d->depth > top)
                top = d->depth;
        if (levels > 1 && (top >> (levels - 1)) == 0)
                goto out; /* more levels than the largest extent has halvings */
        struct lup_array_shape s = lup_array_shape_of(d);
        uint64_t total = 0;
        for (uint32_t l = 0; l < (levels ? levels : 1); l++) {
                struct lup_array_desc ld = lup_array_level_desc(d, l);
                total += lup_array_shape_of(&ld).bytes;
        }
        why = "array larger than lupine's limit per array";
        if (total > LUP_MAX_ARRAY_BYTES)
                goto out;
        *ret = s;
        return 0;
out:
        *ret_why = why;
        return rc;
}

static void end_put(struct lup_wr *w, const struct lup_copy_end *e)
{
        lup_wr_u32(w, e->kind);
        lup_wr_u32(w, 0);
        lup_wr_u64(w, e->handle);
        lup_wr_u64(w, e->x);
        lup_wr_u64(w, e->y);
        lup_wr_u64(w, e->z);
        lup_wr_u64(w, e->pitch);
        lup_wr_u64(w, e->height);
}

static void end_get(struct lup_rd *r, struct lup_copy_end *e)
{
        uint32_t pad;
        lup_rd_u32(r, &e->kind);
        lup_rd_u32(r, &pad);
        lup_rd_u64(r, &e->handle);
        lup_rd_u64(r, &e->x);
        lup_rd_u64(r, &e->y);
        lup_rd_u64(r, &e->z);
        lup_rd_u64(r, &e->pitch);
        lup_rd_u64(r, &e->height);
}

void lup_array_copy_encode(const struct lup_array_copy *c, uint8_t out[static LUP_ARRAY_COPY_WIRE])
{
        struct lup_wr w = lup_wr_init(out, LUP_ARRAY_COPY_WIRE);
        end_put(&w, &c->src);
        end_put(&w, &c->dst);
        lup_wr_u64(&w, c->width);
        lup_wr_u64(&w, c->height);
        lup_wr_u64(&w, c->depth);
}

int lup_array_copy_decode(const uint8_t in[static LUP_ARRAY_COPY_WIRE], struct lup_array_copy *ret)
{
        struct lup_rd r = lup_rd_init(in, LUP_ARRAY_COPY_WIRE);
        struct lup_array_copy c;
        end_get(&r, &c.src);
        end_get(&r, &c.dst);
        lup_rd_u64(&r, &c.width);
        lup_rd_u64(&r, &c.height);
        lup_rd_u64(&r, &c.depth);
        if (lup_rd_finish(&r) < 0 || !c.width || !c.height || !c.depth)
                return -EBADMSG;
        for (int i = 0; i < 2; i++) {
                uint32_t k = i ? c.dst.kind : c.src.kind;
                if (k != LUP_END_DEVICE && k != LUP_END_ARRAY)
                        return -EBADMSG;
        }
        *ret = c;
        return 0;
}

bool lup_array_box_fits(const struct lup_array_shape *s, const struct lup_copy_end *e, uint64_t width, uint64_t height,
                        uint64_t depth)
{
        return e->x <= s->row_bytes && width <= s->row_bytes - e->x && e->y <= s->rows && height <= s->rows - e->y &&
               e->z <= s->slices && depth <= s->slices - e->z;
}

bool lup_device_end_span(const struct lup_copy_end *e, uint64_t width, uint64_t height, uint64_t depth,
                         uint64_t *ret_first, uint64_t *ret_span)
{
        const uint64_t big = 1ull << 48; /* far above any arena */
        if (e->x > big || e->y > big || e->z > big || e->pitch > big || e->height > big || width > big ||
            height > big || depth > big)
                return false;
        if ((height > 1 || depth > 1) && e->pitch < e->x + width)
                return false;
        if (depth > 1 && e->height < e->y + height)
                return false;
        unsigned __int128 first = ((unsigned __int128)e->z * e->height + e->y) * e->pitch + e->x;
        unsigned __int128 span =
                ((unsigned __int128)(depth - 1) * e->height + (height - 1)) * e->pitch + (unsigned __int128)width;
        unsigned __int128 end = (unsigned __int128)e->handle + first + span;
        if (end >> 64)
                return false;
        *ret_first = e->handle + (uint64_t)first;
        *ret_span = (uint64_t)span;
        return true;
}
