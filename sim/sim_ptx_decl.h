/* SPDX-License-Identifier: MIT */
/*
 * The PTX reader's two halves meet here: sim_ptx_decl.c reads tokens,
 * declarations and initialisers; sim_ptx.c reads the directives, kernels
 * and variables they make up, and builds the module. Nothing else uses
 * this header: the reader's interface is sim_ptx.h.
 *
 * The parser holds the current token. Functions that read return 0 with
 * the parser past what they read, or a negative errno: -EBADMSG for text
 * that is not PTX, -E2BIG past a SIM_PTX_MAX_* limit, -ENOMEM.
 */
#ifndef LUPINE_SIM_PTX_DECL_H
#define LUPINE_SIM_PTX_DECL_H

#include "sim_ptx.h"

struct ptx_tok {
        const char *s;          /* into the text: not NUL-terminated */
        size_t n;
        bool line_start;        /* first token on its line */
};

struct ptx_parser {
        const char *p;
        size_t len, off;
        bool eof;
        struct ptx_tok t;       /* the current token */
        struct sim_ptx_module *m;
        bool seen_version, seen_target;
        bool lex_error;         /* sticky: a lenient caller cannot hide one */
};

/* ---- tokens ---- */

/* Moves to the next token. -EBADMSG on an unterminated comment or string,
 * or a byte that cannot appear in PTX; that error is sticky, so that every
 * later call fails too. At the end of the text eof is set. */
int ptx_advance(struct ptx_parser *ps);
/* Whether t spells exactly s. */
bool ptx_tok_eq(const struct ptx_tok *t, const char *s);
/* Whether the current token is word; never at the end. */
bool ptx_is(const struct ptx_parser *ps, const char *word);
/* Moves past the current token when it is word; -EBADMSG otherwise. */
int ptx_expect(struct ptx_parser *ps, const char *word);
/* Moves past the next token that is word, and everything before it;
 * -EBADMSG when the text ends first. */
int ptx_skip_past(struct ptx_parser *ps, const char *word);
/* Whether the current token starts like a name (a letter, '_', '$' or
 * '%'); never at the end. */
bool ptx_is_name(const struct ptx_parser *ps);
/* An unsigned integer literal: decimal, 0x hex, 0b binary or 0 octal,
 * with an optional U suffix. -EBADMSG for anything else or on overflow,
 * with *ret untouched. */
int ptx_tok_uint(const struct ptx_tok *t, uint64_t *ret);
/* The current token as such a literal, at most max, into *ret; then moves
 * past it. */
int ptx_parse_uint(struct ptx_parser *ps, uint64_t max, uint64_t *ret);
/* A NUL-terminated copy of t for the caller to free(); NULL when out of
 * memory. */
char *ptx_tok_strdup(const struct ptx_tok *t);

/* ---- declarations ---- */

/* [.align N] [.vN] .type [.ptr [space] [.align N]] name [dims], with
 * .attribute(...) allowed among the qualifiers. */
struct ptx_decl {
        unsigned elem;          /* fundamental type size */
        unsigned vec;
        uint64_t align;         /* explicit .align, or 0 */
        struct ptx_tok name;
        uint64_t count;         /* elements: product of the dimensions */
        bool open_dim;          /* the first dimension is [] */
        bool is_array;
        bool is_float;
};

/* Reads one declaration into *d, up to and not including what follows
 * its dimensions (an initialiser, ',', ')' or ';'). Only the first
 * dimension may be open; the whole may not pass SIM_PTX_MAX_VAR_BYTES.
 * *d is overwritten even on failure. */
int ptx_parse_decl(struct ptx_parser *ps, struct ptx_decl *d);
/* d's alignment: its .align, else the size of its element (or vector). */
uint64_t ptx_decl_align(const struct ptx_decl *d);

/* ---- initialisers ---- */

/* A variable's initial bytes. */
struct ptx_init {
        uint8_t *buf;           /* the caller's to free(); past len, zero */
        size_t len;             /* bytes the values gave */
        size_t size;            /* the variable's size in bytes */
};

/* Reads the initialiser of a variable declared as d, the '=' already
 * read: one value, or values and nested lists in braces, each value a
 * number (raw 0f/0d bits, decimal or integer) or an address, which reads
 * as 0. More values than d holds is -EBADMSG. An open array is as long as
 * its values, in whole elements; none at all is -EBADMSG. *ret is
 * untouched on failure. */
int ptx_parse_init(struct ptx_parser *ps, const struct ptx_decl *d, struct ptx_init *ret);

#endif
