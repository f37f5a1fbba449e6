/* SPDX-License-Identifier: MIT */
/*
 * LUPINE_SERVER's syntax: servers separated by ',', each one a list of
 * failover alternatives separated by '|' ("hostA:1|hostA2:1,hostB:1").
 * docs/running.md, "Several servers", says what each means and what is
 * to change; today every alternative of every position is one failover
 * list, tried in order, as a plain comma list always was.
 */
#ifndef LUP_SERVER_LIST_H
#define LUP_SERVER_LIST_H

#include <stddef.h>

#define LUP_SERVER_LIST_TEXT_MAX 1024u /* the whole text */
#define LUP_SERVER_MAX_POSITIONS 8u
#define LUP_SERVER_MAX_ENDPOINTS 16u /* alternatives of all positions together */

struct lup_server_list {
        char buf[LUP_SERVER_LIST_TEXT_MAX]; /* the text, cut into NUL-ended endpoints */
        unsigned n_positions;
        unsigned n_endpoints;
        unsigned first[LUP_SERVER_MAX_POSITIONS + 1]; /* position p: endpoint[first[p] .. first[p + 1]) */
        const char *endpoint[LUP_SERVER_MAX_ENDPOINTS];
};

/* Parses text (spaces around entries are ignored). 0, or -EINVAL (an empty
 * entry, a text too long) or -E2BIG (too many positions or endpoints),
 * with the reason in err. The endpoints themselves are checked where they
 * are used (lup_endpoint_parse resolves names). */
int lup_server_list_parse(const char *text, struct lup_server_list *out, char *err, size_t cap);

#endif
