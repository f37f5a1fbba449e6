/* SPDX-License-Identifier: MIT */
#include "image.h"

#include <errno.h>
#include <string.h>

#include "buf.h"

/* ELF64 header fields we use (offsets into Elf64_Ehdr) */
#define EH_SIZE      64u
#define EH_PHOFF     32u
#define EH_SHOFF     40u
#define EH_PHENTSIZE 54u
#define EH_PHNUM     56u
#define EH_SHENTSIZE 58u
#define EH_SHNUM     60u
#define SH_SIZE      64u    /* Elf64_Shdr */
#define SHT_NOBITS   8u

static int add_ok(uint64_t a, uint64_t b, uint64_t *ret)
{
        return __builtin_add_overflow(a, b, ret) ? -EBADMSG : 0;
}

static int measure_elf(const uint8_t *p, size_t avail, size_t *ret)
{
        uint64_t end = EH_SIZE, t;

        if (avail < EH_SIZE || p[4] != 2 /* ELFCLASS64 */ || p[5] != 1 /* little-endian */)
                return -EBADMSG;
        uint64_t shoff = lup_le64(p + EH_SHOFF), phoff = lup_le64(p + EH_PHOFF);
        uint16_t shentsize = lup_le16(p + EH_SHENTSIZE), shnum = lup_le16(p + EH_SHNUM);
        uint16_t phentsize = lup_le16(p + EH_PHENTSIZE), phnum = lup_le16(p + EH_PHNUM);
        if (shnum && shentsize != SH_SIZE)
                return -EBADMSG;
        if (add_ok(shoff, (uint64_t)shnum * shentsize, &t) < 0)
                return -EBADMSG;
        if (t > end)
                end = t;
        if (add_ok(phoff, (uint64_t)phnum * phentsize, &t) < 0)
                return -EBADMSG;
        if (t > end)
                end = t;
        if (end > avail || end > LUP_MAX_BLOB_GUESS)
                return -EBADMSG;
        /* section contents may lie past the section table */
        for (uint16_t i = 0; i < shnum; i++) {
                const uint8_t *sh = p + shoff + (uint64_t)i * SH_SIZE;
                if (lup_le32(sh + 4) == SHT_NOBITS)
                        continue;
                if (add_ok(lup_le64(sh + 24), lup_le64(sh + 32), &t) < 0 || t > avail || t > LUP_MAX_BLOB_GUESS)
                        return -EBADMSG;
                if (t > end)
                        end = t;
        }
        *ret = (size_t)end;
        return 0;
}

static int measure_fatbin(const uint8_t *p, size_t avail, size_t *ret)
{
        if (avail < 16)
                return -EBADMSG;
        uint16_t hsize = lup_le16(p + 6);
        uint64_t body = lup_le64(p + 8), total;
        if (hsize < 16 || add_ok(hsize, body, &total) < 0 || total > avail || total > LUP_MAX_BLOB_GUESS)
                return -EBADMSG;
        *ret = (size_t)total;
        return 0;
}

static int looks_like_ptx(const uint8_t *p, size_t avail)
{
        /* PTX is text: skip blanks, then a comment or a directive */
        size_t i = 0;
        while (i < avail && i < 4096 && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
                i++;
        return i + 1 < avail && ((p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '*')) || p[i] == '.');
}

int lup_image_measure(const uint8_t *p, size_t avail, int *ret_kind, const uint8_t **ret_start, size_t *ret_size)
{
        size_t n = 0;
        int rc;

        if (!p || avail == 0)
                return -EBADMSG;
        /* the 4-byte magic only where there are 4 bytes: tiny PTX is PTX,
         * measured the same by shim and worker (found by fuzz_image) */
        uint32_t magic = avail >= 4 ? lup_le32(p) : 0;
        if (magic == LUP_FATBINC_MAGIC) {
                /* struct { int magic; int version; const unsigned long long *data; void *filename; } */
                if (avail < 16 || avail != SIZE_MAX)
                        return -EBADMSG; /* a wrapper holds a pointer: only meaningful in the caller's process */
                const uint8_t *data;
                memcpy(&data, p + 8, sizeof(data));
                if (!data || lup_le32(data) != LUP_FATBIN_MAGIC)
                        return -EBADMSG;
                p = data;
                magic = LUP_FATBIN_MAGIC;
        }
        if (magic == LUP_FATBIN_MAGIC) {
                rc = measure_fatbin(p, avail, &n);
                *ret_kind = LUP_IMAGE_FATBIN;
        } else if (magic == 0x464c457fu /* "\x7fELF" */) {
                rc = measure_elf(p, avail, &n);
                *ret_kind = LUP_IMAGE_ELF;
        } else if (looks_like_ptx(p, avail)) {
                size_t cap = avail < LUP_MAX_PTX_BYTES ? avail : LUP_MAX_PTX_BYTES;
                n = strnlen((const char *)p, cap);
                rc = n < cap ? 0 : -EBADMSG; /* no NUL within the bound */
                n++;
                *ret_kind = LUP_IMAGE_PTX;
        } else {
                rc = -EBADMSG;
        }
        if (rc < 0)
                return rc;
        *ret_start = p;
        *ret_size = n;
        return 0;
}
