/* SPDX-License-Identifier: MIT */
#include "server_list.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = 0;
        return s;
}

int lup_server_list_parse(const char *text, struct lup_server_list *out, char *err, size_t cap)
{
        memset(out, 0, sizeof(*out));
        if (strlen(text) >= sizeof(out->buf)) {
                snprintf(err, cap, "the list is longer than %u bytes", LUP_SERVER_LIST_TEXT_MAX - 1);
                return -EINVAL;
        }
        snprintf(out->buf, sizeof(out->buf), "%s", text);
        char *pos = out->buf;
        for (;;) {
                char *next_pos = strchr(pos, ',');
                if (next_pos)
                        *next_pos = 0;
                if (out->n_positions == LUP_SERVER_MAX_POSITIONS) {
                        snprintf(err, cap, "more than %u servers (separated by ',')", LUP_SERVER_MAX_POSITIONS);
                        return -E2BIG;
                }
                out->first[out->n_positions] = out->n_endpoints;
                char *alt = pos;
                for (;;) {
                        char *next_alt = strchr(alt, '|');
                        if (next_alt)
                                *next_alt = 0;
                        char *ep = trim(alt);
                        if (!*ep) {
                                snprintf(err, cap, "an empty entry (server %u): nothing between two separators",
                                         out->n_positions + 1);
                                return -EINVAL;
                        }
                        if (out->n_endpoints == LUP_SERVER_MAX_ENDPOINTS) {
                                snprintf(err, cap, "more than %u endpoints in all", LUP_SERVER_MAX_ENDPOINTS);
                                return -E2BIG;
                        }
                        out->endpoint[out->n_endpoints++] = ep;
                        if (!next_alt)
                                break;
                        alt = next_alt + 1;
                }
                out->n_positions++;
                if (!next_pos)
                        break;
                pos = next_pos + 1;
        }
        out->first[out->n_positions] = out->n_endpoints;
        err[0] = 0;
        return 0;
}
