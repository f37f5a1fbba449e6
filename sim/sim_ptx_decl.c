/* SPDX-License-Identifier: MIT */
/*
 * The lower half of the PTX reader: tokens, and the declarations and
 * initialisers that module-scope variables, kernel parameters and .shared
 * arrays share. sim_ptx.c builds the module out of them; the contracts
 * are in sim_ptx_decl.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ptx_decl.h"

/* ---- tokens ---- */

static bool ident_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '$' || c == '%' || c == '.';
}

static int lex(struct ptx_parser *ps);

int ptx_advance(struct ptx_parser *ps)
{
        int e = ps->lex_error ? -EBADMSG : lex(ps);

        if (e < 0)
                ps->lex_error = true;
        return e;
}

static int lex(struct ptx_parser *ps)
{
        bool nl = ps->off == 0;

        while (ps->off < ps->len) {
                char c = ps->p[ps->off];

                if (c == '\n') {
                        nl = true;
                        ps->off++;
                } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
                        ps->off++;
                } else if (c == '/' && ps->off + 1 < ps->len && ps->p[ps->off + 1] == '/') {
                        while (ps->off < ps->len && ps->p[ps->off] != '\n')
                                ps->off++;
                } else if (c == '/' && ps->off + 1 < ps->len && ps->p[ps->off + 1] == '*') {
                        const char *end = NULL;

                        for (size_t i = ps->off + 2; i + 1 < ps->len; i++)
                                if (ps->p[i] == '*' && ps->p[i + 1] == '/') {
                                        end = ps->p + i;
                                        break;
                                }
                        if (!end)
                                return -EBADMSG;
                        if (memchr(ps->p + ps->off, '\n', (size_t)(end - (ps->p + ps->off))))
                                nl = true;
                        ps->off = (size_t)(end - ps->p) + 2;
                } else {
                        break;
                }
        }
        if (ps->off >= ps->len) {
                ps->eof = true;
                ps->t = (struct ptx_tok){ .s = ps->p + ps->len, .n = 0, .line_start = true };
                return 0;
        }

        size_t start = ps->off;
        char c = ps->p[start];

        if (ident_char(c)) {
                while (ps->off < ps->len && ident_char(ps->p[ps->off]))
                        ps->off++;
        } else if (c == '"') {
                ps->off++;
                while (ps->off < ps->len && ps->p[ps->off] != '"' && ps->p[ps->off] != '\n')
                        ps->off += ps->p[ps->off] == '\\' && ps->off + 1 < ps->len ? 2 : 1;
                if (ps->off >= ps->len || ps->p[ps->off] != '"')
                        return -EBADMSG;
                ps->off++;
        } else if (c > ' ' && c < 0x7f) {
                ps->off++;
        } else {
                return -EBADMSG;
        }
        ps->t = (struct ptx_tok){ .s = ps->p + start, .n = ps->off - start, .line_start = nl };
        return 0;
}

bool ptx_tok_eq(const struct ptx_tok *t, const char *s)
{
        return t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

bool ptx_is(const struct ptx_parser *ps, const char *word)
{
        return !ps->eof && ptx_tok_eq(&ps->t, word);
}

int ptx_expect(struct ptx_parser *ps, const char *word)
{
        if (!ptx_is(ps, word))
                return -EBADMSG;
        return ptx_advance(ps);
}

int ptx_skip_past(struct ptx_parser *ps, const char *word)
{
        int e;

        while (!ps->eof && !ptx_is(ps, word))
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        return ptx_expect(ps, word);
}

bool ptx_is_name(const struct ptx_parser *ps)
{
        char c = ps->eof ? 0 : ps->t.s[0];

        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

int ptx_tok_uint(const struct ptx_tok *t, uint64_t *ret)
{
        const char *s = t->s;
        size_t n = t->n, i = 0;
        unsigned base = 10;
        uint64_t v = 0;

        if (n > 0 && (s[n - 1] == 'U' || s[n - 1] == 'u'))
                n--;
        if (n == 0 || s[0] < '0' || s[0] > '9')
                return -EBADMSG;
        if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                i = 2;
        } else if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
                base = 2;
                i = 2;
        } else if (n > 1 && s[0] == '0') {
                base = 8;
                i = 1;
        }
        for (; i < n; i++) {
                char c = s[i];
                unsigned d;

                if (c >= '0' && c <= '9')
                        d = (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        d = (unsigned)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        d = (unsigned)(c - 'A' + 10);
                else
                        return -EBADMSG;
                if (d >= base || v > (UINT64_MAX - d) / base)
                        return -EBADMSG;
                v = v * base + d;
        }
        *ret = v;
        return 0;
}

int ptx_parse_uint(struct ptx_parser *ps, uint64_t max, uint64_t *ret)
{
        uint64_t v;

        if (ps->eof || ptx_tok_uint(&ps->t, &v) < 0 || v > max)
                return -EBADMSG;
        *ret = v;
        return ptx_advance(ps);
}

/* Size in bytes of a PTX fundamental type, 0 when t is not one. */
static unsigned type_size(const struct ptx_tok *t)
{
        static const struct { const char *name; unsigned size; } types[] = {
                { ".b8", 1 }, { ".s8", 1 }, { ".u8", 1 },
                { ".b16", 2 }, { ".s16", 2 }, { ".u16", 2 }, { ".f16", 2 }, { ".bf16", 2 },
                { ".b32", 4 }, { ".s32", 4 }, { ".u32", 4 }, { ".f32", 4 },
                { ".f16x2", 4 }, { ".bf16x2", 4 }, { ".tf32", 4 },
                { ".b64", 8 }, { ".s64", 8 }, { ".u64", 8 }, { ".f64", 8 },
                { ".b128", 16 },
        };

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (ptx_tok_eq(t, types[i].name))
                        return types[i].size;
        return 0;
}

char *ptx_tok_strdup(const struct ptx_tok *t)
{
        char *s = malloc(t->n + 1);

        if (s) {
                memcpy(s, t->s, t->n);
                s[t->n] = '\0';
        }
        return s;
}

/* ---- declarations ---- */

static bool pow2(uint64_t v)
{
        return v != 0 && (v & (v - 1)) == 0;
}

int ptx_parse_decl(struct ptx_parser *ps, struct ptx_decl *d)
{
        uint64_t v;
        int e;

        *d = (struct ptx_decl){ .vec = 1, .count = 1 };
        for (;;) {
                if (ptx_is(ps, ".align")) {
                        if ((e = ptx_advance(ps)) < 0 || (e = ptx_parse_uint(ps, 1u << 16, &v)) < 0)
                                return e;
                        if (!pow2(v))
                                return -EBADMSG;
                        if (!d->elem)   /* after the type it is the pointee's */
                                d->align = v;
                } else if (ptx_is(ps, ".v2") || ptx_is(ps, ".v4") || ptx_is(ps, ".v8")) {
                        d->vec = (unsigned)(ps->t.s[2] - '0');
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                } else if (ptx_is(ps, ".ptr") || ptx_is(ps, ".global") || ptx_is(ps, ".const") ||
                           ptx_is(ps, ".local") || ptx_is(ps, ".shared")) {
                        if (!d->elem)
                                return -EBADMSG;
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                } else if (ptx_is(ps, ".attribute")) {
                        /* .attribute(.managed) and the like */
                        if ((e = ptx_advance(ps)) < 0 || (e = ptx_expect(ps, "(")) < 0 ||
                            (e = ptx_skip_past(ps, ")")) < 0)
                                return e;
                } else if (!d->elem && !ps->eof && type_size(&ps->t)) {
                        d->elem = type_size(&ps->t);
                        d->is_float = ps->t.s[1] == 'f' && ps->t.s[2] != '1';  /* .f32 .f64 */
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                } else {
                        break;
                }
        }
        if (!d->elem || !ptx_is_name(ps) || ps->t.n > SIM_PTX_MAX_NAME)
                return -EBADMSG;
        d->name = ps->t;
        if ((e = ptx_advance(ps)) < 0)
                return e;
        while (ptx_is(ps, "[")) {
                if ((e = ptx_advance(ps)) < 0)
                        return e;
                d->is_array = true;
                if (ptx_is(ps, "]")) {
                        if (d->open_dim || d->count != 1)
                                return -EBADMSG;        /* only the first may be open */
                        d->open_dim = true;
                } else {
                        if ((e = ptx_parse_uint(ps, SIM_PTX_MAX_VAR_BYTES, &v)) < 0)
                                return e;
                        if (v == 0 || d->count > SIM_PTX_MAX_VAR_BYTES / v)
                                return -E2BIG;
                        d->count *= v;
                }
                if ((e = ptx_expect(ps, "]")) < 0)
                        return e;
        }
        if (d->count > SIM_PTX_MAX_VAR_BYTES / (d->elem * d->vec))
                return -E2BIG;
        return 0;
}

uint64_t ptx_decl_align(const struct ptx_decl *d)
{
        return d->align ? d->align : (uint64_t)d->elem * d->vec;
}

/* ---- initialisers ---- */

/* d as the bits of an IEEE float of elem (4 or 8) bytes. */
static uint64_t float_bits(double d, unsigned elem)
{
        uint64_t v;

        if (elem == 4) {
                float f = (float)d;
                uint32_t b;

                memcpy(&b, &f, 4);
                return b;
        }
        memcpy(&v, &d, 8);
        return v;
}

/* One initialiser element as raw little-endian bits of width elem. */
static int parse_init_value(struct ptx_parser *ps, unsigned elem, bool is_float, uint64_t *ret)
{
        bool neg = false;
        uint64_t v;
        int e;

        if (ptx_is(ps, "-")) {
                neg = true;
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        }
        if (ps->eof)
                return -EBADMSG;
        if (ps->t.n > 2 && ps->t.s[0] == '0' && (ps->t.s[1] == 'f' || ps->t.s[1] == 'F' ||
                                                 ps->t.s[1] == 'd' || ps->t.s[1] == 'D')) {
                /* 0fXXXXXXXX and 0dXXXXXXXXXXXXXXXX: raw IEEE bits */
                struct ptx_tok hex = { .s = ps->t.s + 2, .n = ps->t.n - 2 };
                char buf[24] = "0x";

                if (hex.n > 16)
                        return -EBADMSG;
                memcpy(buf + 2, hex.s, hex.n);
                hex = (struct ptx_tok){ .s = buf, .n = hex.n + 2 };
                if (ptx_tok_uint(&hex, &v) < 0)
                        return -EBADMSG;
                if (neg)
                        v ^= ps->t.s[1] == 'f' || ps->t.s[1] == 'F' ? 0x80000000ULL : 0x8000000000000000ULL;
        } else if (memchr(ps->t.s, '.', ps->t.n) || (is_float && ptx_tok_uint(&ps->t, &v) < 0)) {
                char buf[64], *end;
                double d;

                if (!is_float || ps->t.n >= sizeof(buf))
                        return -EBADMSG;
                memcpy(buf, ps->t.s, ps->t.n);
                buf[ps->t.n] = '\0';
                d = strtod(buf, &end);
                if (*end != '\0')
                        return -EBADMSG;
                v = float_bits(neg ? -d : d, elem);
        } else if (ptx_is_name(ps)) {
                /* An address (sym, generic(sym), sym+off): the sim leaves 0. */
                if ((e = ptx_advance(ps)) < 0)
                        return e;
                if (ptx_is(ps, "(")) {
                        if ((e = ptx_advance(ps)) < 0 || !ptx_is_name(ps) || (e = ptx_advance(ps)) < 0 ||
                            (e = ptx_expect(ps, ")")) < 0)
                                return e < 0 ? e : -EBADMSG;
                }
                if (ptx_is(ps, "+")) {
                        if ((e = ptx_advance(ps)) < 0 || (e = ptx_parse_uint(ps, UINT64_MAX, &v)) < 0)
                                return e;
                }
                *ret = 0;
                return 0;
        } else {
                if (ptx_tok_uint(&ps->t, &v) < 0)
                        return -EBADMSG;
                if (is_float)
                        v = float_bits(neg ? -(double)v : (double)v, elem);
                else if (neg)
                        v = (uint64_t)0 - v;
        }
        *ret = v;
        return ptx_advance(ps);
}

struct init_state {
        uint8_t *buf;
        size_t cap;             /* bytes the variable holds (or may, if open) */
        size_t used;
        unsigned elem;
        bool is_float;
};

static int parse_init(struct ptx_parser *ps, struct init_state *st, unsigned depth)
{
        int e;

        if (depth > SIM_PTX_MAX_DEPTH)
                return -EBADMSG;
        if (!ptx_is(ps, "{")) {
                uint64_t v;

                if ((e = parse_init_value(ps, st->elem, st->is_float, &v)) < 0)
                        return e;
                if (st->elem > st->cap - st->used)
                        return -EBADMSG;        /* more values than elements */
                for (unsigned i = 0; i < st->elem; i++)
                        st->buf[st->used + i] = i < 8 ? (uint8_t)(v >> (8 * i)) : 0;
                st->used += st->elem;
                return 0;
        }
        if ((e = ptx_advance(ps)) < 0)
                return e;
        while (!ptx_is(ps, "}")) {
                if ((e = parse_init(ps, st, depth + 1)) < 0)
                        return e;
                if (ptx_is(ps, ","))
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                if (ps->eof)
                        return -EBADMSG;
        }
        return ptx_advance(ps);
}

int ptx_parse_init(struct ptx_parser *ps, const struct ptx_decl *d, struct ptx_init *ret)
{
        size_t size = d->open_dim ? 0 : (size_t)(d->count * d->elem * d->vec);
        struct init_state st = { .elem = d->elem, .is_float = d->is_float };
        int e;

        if (d->open_dim) {
                /* Each value takes at least two bytes of text, so the text
                 * bounds what an open array can hold. */
                size_t most = (ps->len / 2 + 1) * d->elem;

                st.cap = most < SIM_PTX_MAX_VAR_BYTES ? most : SIM_PTX_MAX_VAR_BYTES;
        } else {
                st.cap = size;
        }
        st.buf = calloc(1, st.cap ? st.cap : 1);
        if (!st.buf)
                return -ENOMEM;
        e = parse_init(ps, &st, 0);
        if (e == 0 && d->open_dim) {
                /* Whole elements only. */
                size_t esize = (size_t)d->elem * d->vec;

                size = (st.used + esize - 1) / esize * esize;
                if (size == 0)
                        e = -EBADMSG;
        }
        if (e < 0) {
                free(st.buf);
                return e;
        }
        *ret = (struct ptx_init){ .buf = st.buf, .len = st.used, .size = size };
        return 0;
}
