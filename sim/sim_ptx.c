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
 *
 * This file is the upper half of the reader: directives, kernels and
 * variables. Tokens, declarations and initialisers are sim_ptx_decl.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ptx_decl.h"

/* ---- names a link resolves ---- */

static int note_extern(struct sim_ptx_module *m, const struct ptx_tok *name, bool is_func)
{
        struct sim_ptx_extern *grown;

        if (m->nexterns >= SIM_PTX_MAX_GLOBALS)
                return -E2BIG;
        grown = realloc(m->externs, (m->nexterns + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        m->externs = grown;
        if (!(grown[m->nexterns].name = ptx_tok_strdup(name)))
                return -ENOMEM;
        grown[m->nexterns++].is_func = is_func;
        return 0;
}

static int note_func(struct sim_ptx_module *m, const struct ptx_tok *name)
{
        char **grown;

        for (size_t i = 0; i < m->nfuncs; i++)
                if (ptx_tok_eq(name, m->funcs[i]))
                        return -EBADMSG; /* defined twice */
        if (m->nfuncs >= SIM_PTX_MAX_ENTRIES)
                return -E2BIG;
        grown = realloc(m->funcs, (m->nfuncs + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        m->funcs = grown;
        if (!(grown[m->nfuncs] = ptx_tok_strdup(name)))
                return -ENOMEM;
        m->nfuncs++;
        return 0;
}

/* ---- module-scope variables ---- */

/* Adds the variable declared as d: its initialiser, if any, up to its
 * ';'. */
static int add_global(struct ptx_parser *ps, const struct ptx_decl *d, bool is_const, bool is_extern)
{
        struct sim_ptx_module *m = ps->m;
        struct sim_ptx_global g = { .align = (uint32_t)ptx_decl_align(d), .is_const = is_const };
        struct ptx_init init = { .size = d->open_dim ? 0 : (size_t)(d->count * d->elem * d->vec) };
        struct sim_ptx_global *grown;
        int e;

        if (ptx_is(ps, "=")) {
                if ((e = ptx_advance(ps)) < 0 || (e = ptx_parse_init(ps, d, &init)) < 0)
                        return e;
        } else if (d->open_dim && !is_extern) {
                return -EBADMSG;
        }
        if ((e = ptx_expect(ps, ";")) < 0)
                goto out_free;
        if (is_extern) {        /* declared here, defined elsewhere: no storage */
                e = note_extern(m, &d->name, false);
                goto out_free;
        }
        for (size_t i = 0; i < m->nglobals; i++)
                if (ptx_tok_eq(&d->name, m->globals[i].name)) {
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
        g.size = init.size;
        g.init = init.buf;
        g.init_len = init.len;
        g.name = ptx_tok_strdup(&d->name);
        if (!g.name) {
                e = -ENOMEM;
                goto out_free;
        }
        m->globals[m->nglobals++] = g;
        return 0;

out_free:
        free(init.buf);
        return e;
}

static int parse_global(struct ptx_parser *ps, bool is_const, bool is_extern)
{
        struct ptx_decl d;
        int e;

        if ((e = ptx_advance(ps)) < 0)
                return e;
        if (ptx_is(ps, ".texref") || ptx_is(ps, ".samplerref") || ptx_is(ps, ".surfref"))
                return ptx_skip_past(ps, ";");
        if ((e = ptx_parse_decl(ps, &d)) < 0)
                return e;
        return add_global(ps, &d, is_const, is_extern);
}

/* ---- kernels ---- */

static int parse_params(struct ptx_parser *ps, struct sim_ptx_entry *ent)
{
        uint64_t off = 0;
        int e;

        while (!ptx_is(ps, ")")) {
                struct sim_ptx_param *grown;
                struct ptx_decl d;
                uint64_t size, align;

                if ((e = ptx_expect(ps, ".param")) < 0 || (e = ptx_parse_decl(ps, &d)) < 0)
                        return e;
                if (d.open_dim)
                        return -EBADMSG;
                size = d.count * d.elem * d.vec;
                align = ptx_decl_align(&d);
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
                if (ptx_is(ps, ",")) {
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                        if (ptx_is(ps, ")"))
                                return -EBADMSG;
                } else if (!ptx_is(ps, ")")) {
                        return -EBADMSG;
                }
        }
        ent->param_bytes = (uint32_t)off;
        return ptx_advance(ps);
}

/* Skips a body from its '{' to the matching '}', adding up the .shared
 * declarations it meets (not .extern ones: that is dynamic memory). */
static int parse_body(struct ptx_parser *ps, uint32_t *ret_smem)
{
        uint64_t smem = 0;
        size_t depth = 0;
        bool prev_extern = false;
        int e;

        do {
                if (ps->eof)
                        return -EBADMSG;
                if (ptx_is(ps, "{")) {
                        depth++;
                } else if (ptx_is(ps, "}")) {
                        depth--;
                } else if (ptx_is(ps, ".shared") && !prev_extern) {
                        struct ptx_decl d;
                        uint64_t align;

                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                        /* Lenient: a form the sim does not follow is skipped. */
                        if (ptx_parse_decl(ps, &d) == 0 && !d.open_dim) {
                                align = ptx_decl_align(&d);
                                smem = (smem + align - 1) / align * align + d.count * d.elem * d.vec;
                                if (smem > UINT32_MAX)
                                        return -E2BIG;
                        }
                        prev_extern = false;
                        continue;
                }
                prev_extern = ptx_is(ps, ".extern");
                if ((e = ptx_advance(ps)) < 0)
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

/* Skips performance directives (.maxntid 256, 1, 1 and the like) up to
 * the '{' of a body or the ';' of a prototype. */
static int skip_directives(struct ptx_parser *ps)
{
        int e;

        while (!ps->eof && !ptx_is(ps, "{") && !ptx_is(ps, ";")) {
                char c = ps->t.s[0];

                if (c != '.' && c != ',' && (c < '0' || c > '9'))
                        return -EBADMSG;
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        }
        return 0;
}

static int parse_entry(struct ptx_parser *ps, bool is_extern)
{
        struct sim_ptx_module *m = ps->m;
        struct sim_ptx_entry ent = { 0 }, *grown;
        struct ptx_tok name;
        int e;

        if ((e = ptx_advance(ps)) < 0)
                return e;
        if (!ptx_is_name(ps) || ps->t.n > SIM_PTX_MAX_NAME)
                return -EBADMSG;
        name = ps->t;
        if ((e = ptx_advance(ps)) < 0)
                return e;
        if (ptx_is(ps, "(")) {
                if ((e = ptx_advance(ps)) < 0 || (e = parse_params(ps, &ent)) < 0)
                        goto out_free;
        }
        if ((e = skip_directives(ps)) < 0)
                goto out_free;
        if (ptx_is(ps, ";")) {      /* a prototype: the kernel is elsewhere */
                entry_free(&ent);
                return ptx_advance(ps);
        }
        if (is_extern || (e = parse_body(ps, &ent.static_smem)) < 0) {
                e = e < 0 ? e : -EBADMSG;
                goto out_free;
        }
        for (size_t i = 0; i < m->nentries; i++)
                if (ptx_tok_eq(&name, m->entries[i].name)) {
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
        ent.name = ptx_tok_strdup(&name);
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

/* .func [(ret)] name [(params)] [.noreturn] { body } | ; — the body is
 * skipped; the name is kept for a link: defined, or .extern. */
static int skip_func(struct ptx_parser *ps, bool is_extern)
{
        struct ptx_tok name = { 0 };
        int e;

        if ((e = ptx_advance(ps)) < 0)
                return e;
        if (ptx_is(ps, "(") && (e = ptx_skip_past(ps, ")")) < 0)
                return e;
        if (ptx_is_name(ps)) {
                name = ps->t;
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        }
        if (ptx_is(ps, "(") && (e = ptx_skip_past(ps, ")")) < 0)
                return e;
        if ((e = skip_directives(ps)) < 0)
                return e;
        if (ptx_is(ps, ";")) {
                if (is_extern && name.n && (e = note_extern(ps->m, &name, true)) < 0)
                        return e;
                return ptx_advance(ps);
        }
        if ((e = parse_body(ps, NULL)) < 0)
                return e;
        return name.n ? note_func(ps->m, &name) : 0;
}

/* ---- top level ---- */

static int skip_statement(struct ptx_parser *ps)
{
        int e;

        while (!ps->eof && !ptx_is(ps, ";")) {
                if (ptx_is(ps, "{") || ptx_is(ps, "}"))
                        return -EBADMSG;
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        }
        return ptx_expect(ps, ";");
}

static int parse_version(struct ptx_parser *ps)
{
        const char *dot;
        struct ptx_tok major, minor;
        uint64_t a, b;
        int e;

        if ((e = ptx_advance(ps)) < 0 || ps->eof)
                return e < 0 ? e : -EBADMSG;
        dot = memchr(ps->t.s, '.', ps->t.n);
        if (!dot)
                return -EBADMSG;
        major = (struct ptx_tok){ .s = ps->t.s, .n = (size_t)(dot - ps->t.s) };
        minor = (struct ptx_tok){ .s = dot + 1, .n = ps->t.n - major.n - 1 };
        if (ptx_tok_uint(&major, &a) < 0 || ptx_tok_uint(&minor, &b) < 0 || a == 0 || a > 99 || b > 99)
                return -EBADMSG;
        ps->m->version_major = (unsigned)a;
        ps->m->version_minor = (unsigned)b;
        ps->seen_version = true;
        return ptx_advance(ps);
}

static int parse_target(struct ptx_parser *ps)
{
        int e;

        if ((e = ptx_advance(ps)) < 0)
                return e;
        for (;;) {
                if (ps->eof || !ptx_is_name(ps))
                        return -EBADMSG;
                if (ps->t.n > 3 && memcmp(ps->t.s, "sm_", 3) == 0) {
                        struct ptx_tok num = { .s = ps->t.s + 3, .n = ps->t.n - 3 };
                        uint64_t v;

                        /* sm_90a, sm_100f: the suffix does not change the number */
                        while (num.n > 0 && (num.s[num.n - 1] < '0' || num.s[num.n - 1] > '9'))
                                num.n--;
                        if (ptx_tok_uint(&num, &v) < 0 || v < 10 || v > 1000)
                                return -EBADMSG;
                        ps->m->target_sm = (unsigned)v;
                }
                if ((e = ptx_advance(ps)) < 0)
                        return e;
                if (!ptx_is(ps, ",") || ps->t.line_start)
                        break;
                if ((e = ptx_advance(ps)) < 0)
                        return e;
        }
        if (!ps->m->target_sm)
                return -EBADMSG;
        ps->seen_target = true;
        return 0;
}

static int parse_top(struct ptx_parser *ps)
{
        bool is_extern = false, linkage = false;
        uint64_t v;
        int e;

        while (!ps->eof) {
                if (!ps->m->body_off && ps->seen_target && !ptx_is(ps, ".address_size"))
                        ps->m->body_off = (size_t)(ps->t.s - ps->p);
                if (ptx_is(ps, ".version")) {
                        if (ps->seen_version)
                                return -EBADMSG;
                        e = parse_version(ps);
                } else if (!ps->seen_version) {
                        return -EBADMSG;        /* .version comes first */
                } else if (ptx_is(ps, ".target")) {
                        e = parse_target(ps);
                } else if (ptx_is(ps, ".address_size")) {
                        if ((e = ptx_advance(ps)) == 0 && (e = ptx_parse_uint(ps, 64, &v)) == 0 &&
                            v != 32 && v != 64)
                                e = -EBADMSG;
                } else if (ptx_is(ps, ".visible") || ptx_is(ps, ".weak") || ptx_is(ps, ".common") ||
                           ptx_is(ps, ".extern")) {
                        is_extern = ptx_is(ps, ".extern");
                        linkage = true;
                        if ((e = ptx_advance(ps)) < 0)
                                return e;
                        continue;
                } else if (ptx_is(ps, ".entry")) {
                        e = parse_entry(ps, is_extern);
                } else if (ptx_is(ps, ".func")) {
                        e = skip_func(ps, is_extern);
                } else if (ptx_is(ps, ".global") || ptx_is(ps, ".const")) {
                        e = parse_global(ps, ptx_is(ps, ".const"), is_extern);
                } else if (ptx_is(ps, ".file") || ptx_is(ps, ".loc")) {
                        /* One line, no ';'. */
                        do {
                                e = ptx_advance(ps);
                        } while (e == 0 && !ps->eof && !ps->t.line_start);
                } else if (ptx_is(ps, ".section")) {
                        if ((e = ptx_advance(ps)) == 0 && (e = ptx_advance(ps)) == 0)
                                e = ptx_is(ps, "{") ? parse_body(ps, NULL) : -EBADMSG;
                } else if (ptx_is(ps, ".shared") || ptx_is(ps, ".local") || ptx_is(ps, ".tex") ||
                           ptx_is(ps, ".texref") || ptx_is(ps, ".samplerref") || ptx_is(ps, ".surfref") ||
                           ptx_is(ps, ".pragma") || ptx_is(ps, ".alias")) {
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
        if (!ps->m->body_off)
                ps->m->body_off = ps->len;
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
        for (size_t i = 0; i < m->nfuncs; i++)
                free(m->funcs[i]);
        for (size_t i = 0; i < m->nexterns; i++)
                free(m->externs[i].name);
        free(m->funcs);
        free(m->externs);
        free(m->entries);
        free(m->globals);
        free(m);
}

int sim_ptx_parse(const char *text, size_t len, struct sim_ptx_module **ret)
{
        struct ptx_parser ps = { .p = text, .len = len };
        int e;

        if (!text || len == 0)
                return -EBADMSG;
        ps.m = calloc(1, sizeof(*ps.m));
        if (!ps.m)
                return -ENOMEM;
        e = ptx_advance(&ps);
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
