/* SPDX-License-Identifier: MIT */
/*
 * Module images: which kind an image is, and where its PTX is.
 *
 *   PTX text   starts, after white space and comments, with "//", a block comment or
 *              ".version"; NUL-terminated when known only by address
 *   fatbin     u32 magic 0xBA55ED50, u16 version, u16 header size, u64
 *              size of the entries after the header. Each entry: u16 kind
 *              (1 PTX, 2 ELF), u16, u32 entry header size, u64 payload
 *              size, and, in a header of 64 bytes or more, the target
 *              arch (u32 at 28) and flags (u64 at 40) whose 0x2000 (LZ4)
 *              and 0x8000 (zstd) bits mark a compressed payload, as does a
 *              nonzero decompressed size (u64 at 56)
 *   fatbinC    { int magic 0x466243B1; int version; const u64 *data;
 *              void *filename; }, the wrapper nvcc links into programs
 *   cubin      an ELF file for EM_CUDA (190)
 *
 * The sim runs only PTX, so a cubin, or a fatbin holding only SASS or
 * compressed PTX, is well formed but unusable: NO_BINARY. Anything else
 * that fails a check is INVALID. Nothing is read past what a header
 * claims, and all reads go through the sim_reader functions.
 */
#include <errno.h>
#include <string.h>

#include "sim_ptx.h"

#define FATBIN_HEADER_MAX       4096    /* a real one is 16 bytes */
#define FATBIN_FLAG_LZ4         0x2000ULL
#define FATBIN_FLAG_ZSTD        0x8000ULL
#define SIM_MAX_SM              90      /* what PTX the simulated device can JIT */
#define EM_CUDA                 190

int sim_rd_skip(struct sim_reader *r, size_t n)
{
        if (n > r->len - r->off)
                return -EBADMSG;
        r->off += n;
        return 0;
}

static int rd_le(struct sim_reader *r, unsigned n, uint64_t *ret)
{
        uint64_t v = 0;

        if (n > r->len - r->off)
                return -EBADMSG;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)r->p[r->off + i] << (8 * i);
        r->off += n;
        *ret = v;
        return 0;
}

int sim_rd_u16(struct sim_reader *r, uint16_t *ret)
{
        uint64_t v;
        int e = rd_le(r, 2, &v);

        if (e == 0)
                *ret = (uint16_t)v;
        return e;
}

int sim_rd_u32(struct sim_reader *r, uint32_t *ret)
{
        uint64_t v;
        int e = rd_le(r, 4, &v);

        if (e == 0)
                *ret = (uint32_t)v;
        return e;
}

int sim_rd_u64(struct sim_reader *r, uint64_t *ret)
{
        return rd_le(r, 8, ret);
}

int sim_rd_sub(struct sim_reader *r, size_t n, struct sim_reader *ret)
{
        if (n > r->len - r->off)
                return -EBADMSG;
        *ret = (struct sim_reader){ .p = r->p + r->off, .len = n, .off = 0 };
        r->off += n;
        return 0;
}

/* Whether text (len bytes) starts, after white space, like PTX. */
static bool looks_like_ptx(const char *text, size_t len)
{
        size_t i = 0;

        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
                i++;
        if (len - i >= 2 && text[i] == '/' && (text[i + 1] == '/' || text[i + 1] == '*'))
                return true;
        return len - i >= 8 && memcmp(text + i, ".version", 8) == 0;
}

/* One fatbin entry; *best is updated when it is usable PTX for a higher
 * arch than the best so far. */
static enum sim_image_result fatbin_entry(struct sim_reader *e, uint16_t kind, uint32_t hdr_size,
                                          const char **best, size_t *best_len, uint32_t *best_arch,
                                          bool *saw_unusable)
{
        struct sim_reader h = { .p = e->p, .len = hdr_size };
        uint64_t flags = 0, decompressed = 0;
        uint32_t arch = SIM_MAX_SM;
        const char *text;
        size_t len;

        if (kind != SIM_FATBIN_KIND_PTX) {
                *saw_unusable = true;   /* SASS, or a kind the sim does not know */
                return SIM_IMAGE_OK;
        }
        if (hdr_size >= 64) {
                if (sim_rd_skip(&h, 28) < 0 || sim_rd_u32(&h, &arch) < 0 ||
                    sim_rd_skip(&h, 8) < 0 || sim_rd_u64(&h, &flags) < 0 ||
                    sim_rd_skip(&h, 8) < 0 || sim_rd_u64(&h, &decompressed) < 0)
                        return SIM_IMAGE_INVALID;
        }
        if ((flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD)) || decompressed != 0 || arch > SIM_MAX_SM) {
                *saw_unusable = true;
                return SIM_IMAGE_OK;
        }
        text = (const char *)e->p + hdr_size;
        len = strnlen(text, e->len - hdr_size);
        if (!looks_like_ptx(text, len))
                return SIM_IMAGE_INVALID;
        if (!*best || arch > *best_arch) {
                *best = text;
                *best_len = len;
                *best_arch = arch;
        }
        return SIM_IMAGE_OK;
}

static enum sim_image_result fatbin_find_ptx(struct sim_reader *r, const char **ret_text, size_t *ret_len)
{
        uint32_t magic, best_arch = 0;
        uint16_t version, hdr_size;
        uint64_t fat_size;
        struct sim_reader body;
        const char *best = NULL;
        size_t best_len = 0;
        bool saw_unusable = false;

        if (sim_rd_u32(r, &magic) < 0 || magic != SIM_FATBIN_MAGIC ||
            sim_rd_u16(r, &version) < 0 || sim_rd_u16(r, &hdr_size) < 0 ||
            sim_rd_u64(r, &fat_size) < 0)
                return SIM_IMAGE_INVALID;
        if (version == 0 || hdr_size < 16 || hdr_size > FATBIN_HEADER_MAX || fat_size == 0)
                return SIM_IMAGE_INVALID;
        if (sim_rd_skip(r, hdr_size - 16u) < 0 || sim_rd_sub(r, fat_size, &body) < 0)
                return SIM_IMAGE_INVALID;

        while (body.off < body.len) {
                struct sim_reader e, eh;
                uint16_t kind, unknown;
                uint32_t ehdr_size;
                uint64_t payload;
                enum sim_image_result res;

                eh = body;
                if (sim_rd_u16(&eh, &kind) < 0 || sim_rd_u16(&eh, &unknown) < 0 ||
                    sim_rd_u32(&eh, &ehdr_size) < 0 || sim_rd_u64(&eh, &payload) < 0)
                        return SIM_IMAGE_INVALID;
                if (ehdr_size < 16 || payload > UINT64_MAX - ehdr_size ||
                    sim_rd_sub(&body, ehdr_size + payload, &e) < 0)
                        return SIM_IMAGE_INVALID;
                res = fatbin_entry(&e, kind, ehdr_size, &best, &best_len, &best_arch, &saw_unusable);
                if (res != SIM_IMAGE_OK)
                        return res;
        }
        if (!best)
                return saw_unusable ? SIM_IMAGE_NO_BINARY : SIM_IMAGE_INVALID;
        *ret_text = best;
        *ret_len = best_len;
        return SIM_IMAGE_OK;
}

/* A well-formed ELF header for a CUDA device: the sim cannot run it. */
static enum sim_image_result elf_check(struct sim_reader *r)
{
        uint16_t type, machine, ehsize, shentsize;
        uint32_t version;
        uint8_t ident[16];

        if (r->len < 64)
                return SIM_IMAGE_INVALID;
        memcpy(ident, r->p, sizeof(ident));
        if (memcmp(ident, "\x7f" "ELF", 4) != 0 || (ident[4] != 1 && ident[4] != 2) ||
            ident[5] != 1 || ident[6] != 1)
                return SIM_IMAGE_INVALID;
        r->off = 16;
        if (sim_rd_u16(r, &type) < 0 || sim_rd_u16(r, &machine) < 0 || sim_rd_u32(r, &version) < 0)
                return SIM_IMAGE_INVALID;
        /* e_ehsize and e_shentsize sit at 52/58 in ELF64, 40/46 in ELF32. */
        r->off = ident[4] == 2 ? 52 : 40;
        if (sim_rd_u16(r, &ehsize) < 0 || sim_rd_skip(r, 4) < 0 || sim_rd_u16(r, &shentsize) < 0)
                return SIM_IMAGE_INVALID;
        if (machine != EM_CUDA || version != 1 || type == 0 ||
            ehsize != (ident[4] == 2 ? 64 : 52) || (shentsize != 0 && shentsize != (ident[4] == 2 ? 64 : 40)))
                return SIM_IMAGE_INVALID;
        return SIM_IMAGE_NO_BINARY;
}

/* Compares the leading bytes of p with magic one at a time, so that a
 * short NUL-terminated string is never read past its end (no magic byte
 * is NUL). */
static bool has_magic(const uint8_t *p, const uint8_t *magic, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (p[i] != magic[i])
                        return false;
        return true;
}

static const uint8_t fatbin_magic[4] = { 0x50, 0xed, 0x55, 0xba };
static const uint8_t fatbinc_magic[4] = { 0xb1, 0x43, 0x62, 0x46 };
static const uint8_t elf_magic[4] = { 0x7f, 'E', 'L', 'F' };

enum sim_image_result sim_image_find_ptx_sized(const void *image, size_t size,
                                               const char **ret_text, size_t *ret_len)
{
        struct sim_reader r = { .p = image, .len = size };
        const char *text = image;
        size_t len;

        if (!image || size == 0)
                return SIM_IMAGE_INVALID;
        if (size >= 4 && has_magic(r.p, fatbin_magic, 4))
                return fatbin_find_ptx(&r, ret_text, ret_len);
        if (size >= 4 && has_magic(r.p, elf_magic, 4))
                return elf_check(&r);
        len = strnlen(text, size);
        if (len == 0 || !looks_like_ptx(text, len))
                return SIM_IMAGE_INVALID;
        *ret_text = text;
        *ret_len = len;
        return SIM_IMAGE_OK;
}

enum sim_image_result sim_image_find_ptx(const void *image, size_t max_len,
                                         const char **ret_text, size_t *ret_len)
{
        const uint8_t *p = image;
        struct sim_reader r;
        uint16_t hdr_size;
        uint64_t fat_size;
        size_t len;

        if (!image)
                return SIM_IMAGE_INVALID;
        if (has_magic(p, fatbin_magic, 4)) {
                /* Only the header can say how long the image is. */
                r = (struct sim_reader){ .p = p, .len = 16 };
                if (sim_rd_skip(&r, 6) < 0 || sim_rd_u16(&r, &hdr_size) < 0 ||
                    sim_rd_u64(&r, &fat_size) < 0)
                        return SIM_IMAGE_INVALID;
                if (hdr_size < 16 || hdr_size > FATBIN_HEADER_MAX || fat_size > max_len - hdr_size)
                        return SIM_IMAGE_INVALID;
                return sim_image_find_ptx_sized(image, hdr_size + fat_size, ret_text, ret_len);
        }
        if (has_magic(p, fatbinc_magic, 4)) {
                struct { int magic; int version; const unsigned long long *data; void *filename; } w;

                memcpy(&w, image, sizeof(w));
                if ((w.version != 1 && w.version != 2) || !w.data ||
                    !has_magic((const uint8_t *)w.data, fatbin_magic, 4))
                        return SIM_IMAGE_INVALID;
                return sim_image_find_ptx(w.data, max_len, ret_text, ret_len);
        }
        if (has_magic(p, elf_magic, 4)) {
                /* Only the 64-byte header is read; the sim never needs the
                 * rest, and its size is not known. */
                r = (struct sim_reader){ .p = p, .len = 64 };
                return elf_check(&r);
        }
        len = strnlen(image, max_len);
        if (len == max_len)
                return SIM_IMAGE_INVALID;
        return sim_image_find_ptx_sized(image, len + 1, ret_text, ret_len);
}
