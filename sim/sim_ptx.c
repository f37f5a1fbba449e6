/* SPDX-License-Identifier: MIT */
/*
 * A PTX reader: just enough of the grammar to list a module's kernels
 * and variables the way the driver sees them after loading it.
 *
 * Top level, strictly: .version, .target, .address_size, linkage
 * (.visible .extern .weak .common), .entry and .func (prototypes and
 * bodies), .global/.const variables with initialisers, .file/.loc (one
 * line each), .section { ... }, and other state-space declarations up to
 * their ';'. Anything else is not PTX, and neither is an unbalanced body,
 * a malformed parameter list or initialiser, or a stray byte that is not
 * printable ASCII. Inside a body only braces and .shared declarations
 * matter; instructions are not checked.
 *
 * Parameter layout follows the PTX ABI the driver uses for kernel
 * parameters: each one at the next multiple of its alignment (its size
 * for scalars, its element size or .align for arrays).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ptx.h"

struct tok {
        const char *s;
        size_t n;
        bool line_start;        /* first token on its line */
};

struct parser {
        const char *p;
        size_t len, off;
        bool eof;
        struct tok t;           /* the current token */
        struct sim_ptx_module *m;
        bool seen_version, seen_target;
        bool lex_error;         /* sticky: a lenient caller cannot hide one */
};

static bool ident_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '$' || c == '%' || c == '.';
}

static int lex(struct parser *ps);

/* Moves to the next token; -EBADMSG on an unterminated comment or string
 * or a byte that cannot appear in PTX. At the end, eof is set. */
static int advance(struct parser *ps)
{
        int e = ps->lex_error ? -EBADMSG : lex(ps);

        if (e < 0)
                ps->lex_error = true;
        return e;
}

static int lex(struct parser *ps)
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
                ps->t = (struct tok){ .s = ps->p + ps->len, .n = 0, .line_start = true };
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
        ps->t = (struct tok){ .s = ps->p + start, .n = ps->off - start, .line_start = nl };
        return 0;
}

static bool is(const struct parser *ps, const char *word)
{
        size_t n = strlen(word);

        return !ps->eof && ps->t.n == n && memcmp(ps->t.s, word, n) == 0;
}

static int expect(struct parser *ps, const char *word)
{
        if (!is(ps, word))
                return -EBADMSG;
        return advance(ps);
}

static bool is_name(const struct parser *ps)
{
        char c = ps->eof ? 0 : ps->t.s[0];

        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

/* An unsigned integer literal: decimal, 0x hex, 0b binary or 0 octal,
 * with an optional U suffix. */
static int tok_uint(const struct tok *t, uint64_t *ret)
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

static int parse_uint(struct parser *ps, uint64_t max, uint64_t *ret)
{
        uint64_t v;

        if (ps->eof || tok_uint(&ps->t, &v) < 0 || v > max)
                return -EBADMSG;
        *ret = v;
        return advance(ps);
}

/* Size in bytes of a PTX fundamental type, 0 when t is not one. */
static unsigned type_size(const struct tok *t)
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
                if (t->n == strlen(types[i].name) && memcmp(t->s, types[i].name, t->n) == 0)
                        return types[i].size;
        return 0;
}

static char *tok_strdup(const struct tok *t)
{
        char *s = malloc(t->n + 1);

        if (s) {
                memcpy(s, t->s, t->n);
                s[t->n] = '\0';
        }
        return s;
}

/* ---- declarations: [.align N] [.vN] .type [.ptr [space] [.align N]] name [dims] ---- */

struct decl {
        unsigned elem;          /* fundamental type size */
        unsigned vec;
        uint64_t align;         /* explicit .align, or 0 */
        struct tok name;
        uint64_t count;         /* elements: product of the dimensions */
        bool open_dim;          /* the first dimension is [] */
        bool is_array;
        bool is_float;
};

static bool pow2(uint64_t v)
{
        return v != 0 && (v & (v - 1)) == 0;
}

static int parse_decl(struct parser *ps, struct decl *d)
{
        uint64_t v;
        int e;

        *d = (struct decl){ .vec = 1, .count = 1 };
        for (;;) {
                if (is(ps, ".align")) {
                        if ((e = advance(ps)) < 0 || (e = parse_uint(ps, 1u << 16, &v)) < 0)
                                return e;
                        if (!pow2(v))
                                return -EBADMSG;
                        if (!d->elem)   /* after the type it is the pointee's */
                                d->align = v;
                } else if (is(ps, ".v2") || is(ps, ".v4") || is(ps, ".v8")) {
                        d->vec = (unsigned)(ps->t.s[2] - '0');
                        if ((e = advance(ps)) < 0)
                                return e;
                } else if (is(ps, ".ptr") || is(ps, ".global") || is(ps, ".const") ||
                           is(ps, ".local") || is(ps, ".shared")) {
                        if (!d->elem)
                                return -EBADMSG;
                        if ((e = advance(ps)) < 0)
                                return e;
                } else if (is(ps, ".attribute")) {
                        /* .attribute(.managed) and the like */
                        if ((e = advance(ps)) < 0 || (e = expect(ps, "(")) < 0)
                                return e;
                        while (!ps->eof && !is(ps, ")"))
                                if ((e = advance(ps)) < 0)
                                        return e;
                        if ((e = expect(ps, ")")) < 0)
                                return e;
                } else if (!d->elem && !ps->eof && type_size(&ps->t)) {
                        d->elem = type_size(&ps->t);
                        d->is_float = ps->t.s[1] == 'f' && ps->t.s[2] != '1';  /* .f32 .f64 */
                        if ((e = advance(ps)) < 0)
                                return e;
                } else {
                        break;
                }
        }
        if (!d->elem || !is_name(ps) || ps->t.n > SIM_PTX_MAX_NAME)
                return -EBADMSG;
        d->name = ps->t;
        if ((e = advance(ps)) < 0)
                return e;
        while (is(ps, "[")) {
                if ((e = advance(ps)) < 0)
                        return e;
                d->is_array = true;
                if (is(ps, "]")) {
                        if (d->open_dim || d->count != 1)
                                return -EBADMSG;        /* only the first may be open */
                        d->open_dim = true;
                } else {
                        if ((e = parse_uint(ps, SIM_PTX_MAX_VAR_BYTES, &v)) < 0)
                                return e;
                        if (v == 0 || d->count > SIM_PTX_MAX_VAR_BYTES / v)
                                return -E2BIG;
                        d->count *= v;
                }
                if ((e = expect(ps, "]")) < 0)
                        return e;
        }
        if (d->count > SIM_PTX_MAX_VAR_BYTES / (d->elem * d->vec))
                return -E2BIG;
        return 0;
}

static uint64_t decl_align(const struct decl *d)
{
        return d->align ? d->align : (uint64_t)d->elem * d->vec;
}

/* ---- module-scope variables ---- */

/* One initialiser element as raw little-endian bits of width elem. */
static int parse_init_value(struct parser *ps, unsigned elem, bool is_float, uint64_t *ret)
{
        bool neg = false;
        uint64_t v;
        int e;

        if (is(ps, "-")) {
                neg = true;
                if ((e = advance(ps)) < 0)
                        return e;
        }
        if (ps->eof)
                return -EBADMSG;
        if (ps->t.n > 2 && ps->t.s[0] == '0' && (ps->t.s[1] == 'f' || ps->t.s[1] == 'F' ||
                                                 ps->t.s[1] == 'd' || ps->t.s[1] == 'D')) {
                /* 0fXXXXXXXX and 0dXXXXXXXXXXXXXXXX: raw IEEE bits */
                struct tok hex = { .s = ps->t.s + 2, .n = ps->t.n - 2 };
                char buf[24] = "0x";

                if (hex.n > 16)
                        return -EBADMSG;
                memcpy(buf + 2, hex.s, hex.n);
                hex = (struct tok){ .s = buf, .n = hex.n + 2 };
                if (tok_uint(&hex, &v) < 0)
                        return -EBADMSG;
                if (neg)
                        v ^= ps->t.s[1] == 'f' || ps->t.s[1] == 'F' ? 0x80000000ULL : 0x8000000000000000ULL;
        } else if (memchr(ps->t.s, '.', ps->t.n) || (is_float && tok_uint(&ps->t, &v) < 0)) {
                char buf[64], *end;
                double d;

                if (!is_float || ps->t.n >= sizeof(buf))
                        return -EBADMSG;
                memcpy(buf, ps->t.s, ps->t.n);
                buf[ps->t.n] = '\0';
                d = strtod(buf, &end);
                if (*end != '\0')
                        return -EBADMSG;
                if (neg)
                        d = -d;
                if (elem == 4) {
                        float f = (float)d;
                        uint32_t b;

                        memcpy(&b, &f, 4);
                        v = b;
                } else {
                        memcpy(&v, &d, 8);
                }
        } else if (is_name(ps)) {
                /* An address (sym, generic(sym), sym+off): the sim leaves 0. */
                if ((e = advance(ps)) < 0)
                        return e;
                if (is(ps, "(")) {
                        if ((e = advance(ps)) < 0 || !is_name(ps) || (e = advance(ps)) < 0 ||
                            (e = expect(ps, ")")) < 0)
                                return e < 0 ? e : -EBADMSG;
                }
                if (is(ps, "+")) {
                        if ((e = advance(ps)) < 0 || (e = parse_uint(ps, UINT64_MAX, &v)) < 0)
                                return e;
                }
                *ret = 0;
                return 0;
        } else {
                if (tok_uint(&ps->t, &v) < 0)
                        return -EBADMSG;
                if (is_float) {
                        double d = neg ? -(double)v : (double)v;

                        if (elem == 4) {
                                float f = (float)d;
                                uint32_t b;

                                memcpy(&b, &f, 4);
                                v = b;
                        } else {
                                memcpy(&v, &d, 8);
                        }
                } else if (neg) {
                        v = (uint64_t)0 - v;
                }
        }
        *ret = v;
        return advance(ps);
}

struct init_state {
        uint8_t *buf;
        size_t cap;             /* bytes the variable holds (or may, if open) */
        size_t used;
        unsigned elem;
        bool is_float;
};

static int parse_init(struct parser *ps, struct init_state *st, unsigned depth)
{
        int e;

        if (depth > SIM_PTX_MAX_DEPTH)
                return -EBADMSG;
        if (!is(ps, "{")) {
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
        if ((e = advance(ps)) < 0)
                return e;
        while (!is(ps, "}")) {
                if ((e = parse_init(ps, st, depth + 1)) < 0)
                        return e;
                if (is(ps, ","))
                        if ((e = advance(ps)) < 0)
                                return e;
                if (ps->eof)
                        return -EBADMSG;
        }
        return advance(ps);
}

static int add_global(struct parser *ps, const struct decl *d, bool is_const, bool is_extern)
{
        struct sim_ptx_module *m = ps->m;
        size_t size = d->open_dim ? 0 : (size_t)(d->count * d->elem * d->vec);
        struct sim_ptx_global g = { .align = (uint32_t)decl_align(d), .is_const = is_const };
        struct init_state st = { .elem = d->elem, .is_float = d->is_float };
        struct sim_ptx_global *grown;
        int e;

        if (is(ps, "=")) {
                if ((e = advance(ps)) < 0)
                        return e;
                if (d->open_dim) {
                        /* Each value takes at least two bytes of text, so
                         * the text bounds what an open array can hold. */
                        size_t most = (ps->len / 2 + 1) * d->elem;

                        st.cap = most < SIM_PTX_MAX_VAR_BYTES ? most : SIM_PTX_MAX_VAR_BYTES;
                } else {
                        st.cap = size;
                }
                st.buf = calloc(1, st.cap ? st.cap : 1);
                if (!st.buf)
                        return -ENOMEM;
                e = parse_init(ps, &st, 0);
                if (e < 0)
                        goto out_free;
                if (d->open_dim) {
                        /* Whole elements only. */
                        size_t esize = (size_t)d->elem * d->vec;

                        size = (st.used + esize - 1) / esize * esize;
                        if (size == 0) {
                                e = -EBADMSG;
                                goto out_free;
                        }
                }
        } else if (d->open_dim && !is_extern) {
                return -EBADMSG;
        }
        if ((e = expect(ps, ";")) < 0)
                goto out_free;
        if (is_extern) {        /* declared here, defined elsewhere: no storage */
                e = 0;
                goto out_free;
        }
        for (size_t i = 0; i < m->nglobals; i++)
                if (strlen(m->globals[i].name) == d->name.n &&
                    memcmp(m->globals[i].name, d->name.s, d->name.n) == 0) {
                        e = -EBADMSG;
                        goto out_free;
                }
        if (m->nglobals >= SIM_PTX_MAX_GLOBALS) {
                e = -E2BIG;
                goto out_free;
        }
        grown = realloc(m->globals, (m->nglobals + 1) * sizeof(*grown));
        if (!grown) {
                e = -ENOMEM;
                goto out_free;
        }
        m->globals = grown;
        g.size = size;
        g.init = st.buf;
        g.init_len = st.used;
        g.name = tok_strdup(&d->name);
        if (!g.name) {
                e = -ENOMEM;
                goto out_free;
        }
        m->globals[m->nglobals++] = g;
        return 0;

out_free:
        free(st.buf);
        return e;
}

static int parse_global(struct parser *ps, bool is_const, bool is_extern)
{
        struct decl d;
        int e;

        if ((e = advance(ps)) < 0)
                return e;
        if (is(ps, ".texref") || is(ps, ".samplerref") || is(ps, ".surfref")) {
                while (!ps->eof && !is(ps, ";"))
                        if ((e = advance(ps)) < 0)
                                return e;
                return expect(ps, ";");
        }
        if ((e = parse_decl(ps, &d)) < 0)
                return e;
        return add_global(ps, &d, is_const, is_extern);
}

/* ---- kernels ---- */

static int parse_params(struct parser *ps, struct sim_ptx_entry *ent)
{
        uint64_t off = 0;
        int e;

        while (!is(ps, ")")) {
                struct sim_ptx_param *grown;
                struct decl d;
                uint64_t size, align;

                if ((e = expect(ps, ".param")) < 0 || (e = parse_decl(ps, &d)) < 0)
                        return e;
                if (d.open_dim)
                        return -EBADMSG;
                size = d.count * d.elem * d.vec;
                align = decl_align(&d);
                off = (off + align - 1) / align * align;
                if (size > SIM_PTX_MAX_PARAM_BYTES || off > SIM_PTX_MAX_PARAM_BYTES - size)
                        return -E2BIG;
                if (ent->nparams >= SIM_PTX_MAX_PARAMS)
                        return -E2BIG;
                grown = realloc(ent->params, (ent->nparams + 1) * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                ent->params = grown;
                ent->params[ent->nparams++] = (struct sim_ptx_param){
                        .offset = (uint32_t)off, .size = (uint32_t)size, .align = (uint32_t)align,
                };
                off += size;
                if (is(ps, ",")) {
                        if ((e = advance(ps)) < 0)
                                return e;
                        if (is(ps, ")"))
                                return -EBADMSG;
                } else if (!is(ps, ")")) {
                        return -EBADMSG;
                }
        }
        ent->param_bytes = (uint32_t)off;
        return advance(ps);
}

/* Skips a body from its '{' to the matching '}', adding up the .shared
 * declarations it meets (not .extern ones: that is dynamic memory). */
static int parse_body(struct parser *ps, uint32_t *ret_smem)
{
        uint64_t smem = 0;
        size_t depth = 0;
        bool prev_extern = false;
        int e;

        do {
                if (ps->eof)
                        return -EBADMSG;
                if (is(ps, "{")) {
                        depth++;
                } else if (is(ps, "}")) {
                        depth--;
                } else if (is(ps, ".shared") && !prev_extern) {
                        struct decl d;
                        uint64_t align;

                        if ((e = advance(ps)) < 0)
                                return e;
                        /* Lenient: a form the sim does not follow is skipped. */
                        if (parse_decl(ps, &d) == 0 && !d.open_dim) {
                                align = decl_align(&d);
                                smem = (smem + align - 1) / align * align + d.count * d.elem * d.vec;
                                if (smem > UINT32_MAX)
                                        return -E2BIG;
                        }
                        prev_extern = false;
                        continue;
                }
                prev_extern = is(ps, ".extern");
                if ((e = advance(ps)) < 0)
                        return e;
        } while (depth > 0);
        if (ret_smem)
                *ret_smem = (uint32_t)smem;
        return 0;
}

static void entry_free(struct sim_ptx_entry *ent)
{
        free(ent->name);
        free(ent->params);
}

static int parse_entry(struct parser *ps, bool is_extern)
{
        struct sim_ptx_module *m = ps->m;
        struct sim_ptx_entry ent = { 0 }, *grown;
        struct tok name;
        int e;

        if ((e = advance(ps)) < 0)
                return e;
        if (!is_name(ps) || ps->t.n > SIM_PTX_MAX_NAME)
                return -EBADMSG;
        name = ps->t;
        if ((e = advance(ps)) < 0)
                return e;
        if (is(ps, "(")) {
                if ((e = advance(ps)) < 0 || (e = parse_params(ps, &ent)) < 0)
                        goto out_free;
        }
        /* Performance directives (.maxntid 256, 1, 1 and the like). */
        while (!ps->eof && !is(ps, "{") && !is(ps, ";")) {
                if (ps->t.s[0] != '.' && ps->t.s[0] != ',' && (ps->t.s[0] < '0' || ps->t.s[0] > '9')) {
                        e = -EBADMSG;
                        goto out_free;
                }
                if ((e = advance(ps)) < 0)
                        goto out_free;
        }
        if (is(ps, ";")) {      /* a prototype: the kernel is elsewhere */
                entry_free(&ent);
                return advance(ps);
        }
        if (is_extern || (e = parse_body(ps, &ent.static_smem)) < 0) {
                e = e < 0 ? e : -EBADMSG;
                goto out_free;
        }
        for (size_t i = 0; i < m->nentries; i++)
                if (strlen(m->entries[i].name) == name.n && memcmp(m->entries[i].name, name.s, name.n) == 0) {
                        e = -EBADMSG;
                        goto out_free;
                }
        if (m->nentries >= SIM_PTX_MAX_ENTRIES) {
                e = -E2BIG;
                goto out_free;
        }
        grown = realloc(m->entries, (m->nentries + 1) * sizeof(*grown));
        if (!grown) {
                e = -ENOMEM;
                goto out_free;
        }
        m->entries = grown;
        ent.name = tok_strdup(&name);
        if (!ent.name) {
                e = -ENOMEM;
                goto out_free;
        }
        m->entries[m->nentries++] = ent;
        return 0;

out_free:
        entry_free(&ent);
        return e;
}

/* .func [(ret)] name [(params)] [.noreturn] { body } | ; — skipped. */
static int skip_func(struct parser *ps)
{
        int e;

        if ((e = advance(ps)) < 0)
                return e;
        for (int parens = 0; parens < 2 && is(ps, "("); parens++) {
                while (!ps->eof && !is(ps, ")"))
                        if ((e = advance(ps)) < 0)
                                return e;
                if ((e = expect(ps, ")")) < 0)
                        return e;
                if (parens == 0 && is_name(ps))
                        if ((e = advance(ps)) < 0)
                                return e;
        }
        if (is_name(ps) && (e = advance(ps)) < 0)
                return e;
        if (is(ps, "(")) {
                while (!ps->eof && !is(ps, ")"))
                        if ((e = advance(ps)) < 0)
                                return e;
                if ((e = expect(ps, ")")) < 0)
                        return e;
        }
        while (!ps->eof && !is(ps, "{") && !is(ps, ";")) {
                if (ps->t.s[0] != '.' && ps->t.s[0] != ',' && (ps->t.s[0] < '0' || ps->t.s[0] > '9'))
                        return -EBADMSG;
                if ((e = advance(ps)) < 0)
                        return e;
        }
        if (is(ps, ";"))
                return advance(ps);
        return parse_body(ps, NULL);
}

/* ---- top level ---- */

static int skip_statement(struct parser *ps)
{
        int e;

        while (!ps->eof && !is(ps, ";")) {
                if (is(ps, "{") || is(ps, "}"))
                        return -EBADMSG;
                if ((e = advance(ps)) < 0)
                        return e;
        }
        return expect(ps, ";");
}

static int parse_version(struct parser *ps)
{
        const char *dot;
        struct tok major, minor;
        uint64_t a, b;
        int e;

        if ((e = advance(ps)) < 0 || ps->eof)
                return e < 0 ? e : -EBADMSG;
        dot = memchr(ps->t.s, '.', ps->t.n);
        if (!dot)
                return -EBADMSG;
        major = (struct tok){ .s = ps->t.s, .n = (size_t)(dot - ps->t.s) };
        minor = (struct tok){ .s = dot + 1, .n = ps->t.n - major.n - 1 };
        if (tok_uint(&major, &a) < 0 || tok_uint(&minor, &b) < 0 || a == 0 || a > 99 || b > 99)
                return -EBADMSG;
        ps->m->version_major = (unsigned)a;
        ps->m->version_minor = (unsigned)b;
        ps->seen_version = true;
        return advance(ps);
}

static int parse_target(struct parser *ps)
{
        int e;

        if ((e = advance(ps)) < 0)
                return e;
        for (;;) {
                if (ps->eof || !is_name(ps))
                        return -EBADMSG;
                if (ps->t.n > 3 && memcmp(ps->t.s, "sm_", 3) == 0) {
                        struct tok num = { .s = ps->t.s + 3, .n = ps->t.n - 3 };
                        uint64_t v;

                        /* sm_90a, sm_100f: the suffix does not change the number */
                        while (num.n > 0 && (num.s[num.n - 1] < '0' || num.s[num.n - 1] > '9'))
                                num.n--;
                        if (tok_uint(&num, &v) < 0 || v < 10 || v > 1000)
                                return -EBADMSG;
                        ps->m->target_sm = (unsigned)v;
                }
                if ((e = advance(ps)) < 0)
                        return e;
                if (!is(ps, ",") || ps->t.line_start)
                        break;
                if ((e = advance(ps)) < 0)
                        return e;
        }
        if (!ps->m->target_sm)
                return -EBADMSG;
        ps->seen_target = true;
        return 0;
}

static int parse_top(struct parser *ps)
{
        bool is_extern = false, linkage = false;
        uint64_t v;
        int e;

        while (!ps->eof) {
                if (is(ps, ".version")) {
                        if (ps->seen_version)
                                return -EBADMSG;
                        e = parse_version(ps);
                } else if (!ps->seen_version) {
                        return -EBADMSG;        /* .version comes first */
                } else if (is(ps, ".target")) {
                        e = parse_target(ps);
                } else if (is(ps, ".address_size")) {
                        if ((e = advance(ps)) == 0 && (e = parse_uint(ps, 64, &v)) == 0 &&
                            v != 32 && v != 64)
                                e = -EBADMSG;
                } else if (is(ps, ".visible") || is(ps, ".weak") || is(ps, ".common") ||
                           is(ps, ".extern")) {
                        is_extern = is(ps, ".extern");
                        linkage = true;
                        if ((e = advance(ps)) < 0)
                                return e;
                        continue;
                } else if (is(ps, ".entry")) {
                        e = parse_entry(ps, is_extern);
                } else if (is(ps, ".func")) {
                        e = skip_func(ps);
                } else if (is(ps, ".global") || is(ps, ".const")) {
                        e = parse_global(ps, is(ps, ".const"), is_extern);
                } else if (is(ps, ".file") || is(ps, ".loc")) {
                        /* One line, no ';'. */
                        do {
                                e = advance(ps);
                        } while (e == 0 && !ps->eof && !ps->t.line_start);
                } else if (is(ps, ".section")) {
                        if ((e = advance(ps)) == 0 && (e = advance(ps)) == 0)
                                e = is(ps, "{") ? parse_body(ps, NULL) : -EBADMSG;
                } else if (is(ps, ".shared") || is(ps, ".local") || is(ps, ".tex") ||
                           is(ps, ".texref") || is(ps, ".samplerref") || is(ps, ".surfref") ||
                           is(ps, ".pragma") || is(ps, ".alias")) {
                        e = skip_statement(ps);
                } else {
                        return -EBADMSG;
                }
                if (e < 0)
                        return e;
                is_extern = false;
                linkage = false;
                /* Code before the .target that it is for is not PTX. */
                if (!ps->seen_target && ps->m->nentries + ps->m->nglobals > 0)
                        return -EBADMSG;
        }
        /* A linkage directive must qualify something. */
        return ps->seen_version && ps->seen_target && !linkage ? 0 : -EBADMSG;
}

void sim_ptx_free(struct sim_ptx_module *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->nentries; i++)
                entry_free(&m->entries[i]);
        for (size_t i = 0; i < m->nglobals; i++) {
                free(m->globals[i].name);
                free(m->globals[i].init);
        }
        free(m->entries);
        free(m->globals);
        free(m);
}

int sim_ptx_parse(const char *text, size_t len, struct sim_ptx_module **ret)
{
        struct parser ps = { .p = text, .len = len };
        int e;

        if (!text || len == 0)
                return -EBADMSG;
        ps.m = calloc(1, sizeof(*ps.m));
        if (!ps.m)
                return -ENOMEM;
        e = advance(&ps);
        if (e == 0)
                e = parse_top(&ps);
        if (e == 0 && ps.lex_error)
                e = -EBADMSG;
        if (e < 0) {
                sim_ptx_free(ps.m);
                return e;
        }
        *ret = ps.m;
        return 0;
}

const struct sim_ptx_entry *sim_ptx_find_entry(const struct sim_ptx_module *m, const char *name)
{
        for (size_t i = 0; i < m->nentries; i++)
                if (strcmp(m->entries[i].name, name) == 0)
                        return &m->entries[i];
        return NULL;
}
