/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's names and what they map to on disk: session
 * directories, object names, stripe files, epoch directories and the
 * .tmp-* names of work in progress (the layout is in dir_internal.h).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "frame.h"

/* The provider header's session rule is the wire's: one rule, in common/. */
_Static_assert(DIR_SESSION_MAX == LUP_MAX_NAME, "session names are the wire's names");

/* The bytes of an object name's components. Session names use the same set
 * (lup_session_name_valid), but object names have their own length limit
 * and '/', so they are checked here. */
static bool name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
}

bool dir_session_valid(const char *s, size_t *ret_len)
{
        size_t n = strnlen(s, DIR_SESSION_MAX + 1);

        if (!lup_session_name_valid(s, n))
                return false;
        *ret_len = n;
        return true;
}

int dir_session_to_sdir(const char *session, char sdir[static DIR_SDIR_MAX + 1])
{
        size_t n, o = 0;

        if (!session || !dir_session_valid(session, &n))
                return -EINVAL;
        /* ".", ".." and ".tmp-*" are valid session names: keep them clear of
         * the directory's own entries with a character names never hold. */
        if (session[0] == '.')
                sdir[o++] = '%';
        memcpy(sdir + o, session, n);
        sdir[o + n] = '\0';
        return 0;
}

bool dir_sdir_to_session(const char *sdir, char session[static DIR_SESSION_MAX + 1])
{
        const char *s = sdir;
        size_t n;

        if (s[0] == '%') {
                s++;
                if (s[0] != '.')
                        return false;
        } else if (s[0] == '.') {
                return false;
        }
        if (!dir_session_valid(s, &n) || s[n] != '\0')
                return false;
        memcpy(session, s, n + 1);
        return true;
}

bool dir_object_name_valid(const char *name)
{
        size_t n;
        const char *comp;

        if (!name)
                return false;
        n = strnlen(name, DIR_OBJECT_MAX + 1);
        if (n == 0 || n > DIR_OBJECT_MAX)
                return false;
        if (strstr(name, ".."))
                return false;
        if (strcmp(name, DIR_MARKER_NAME) == 0)
                return false;
        comp = name;
        for (size_t i = 0; i <= n; i++) {
                char c = name[i];
                if (c == '/' || c == '\0') {
                        size_t len = (size_t)(name + i - comp);
                        /* no empty component (leading, trailing or doubled '/') and
                         * no ".": each name maps to exactly one file */
                        if (len == 0 || (len == 1 && comp[0] == '.'))
                                return false;
                        comp = name + i + 1;
                        continue;
                }
                if (!name_char(c))
                        return false;
        }
        return true;
}

size_t dir_stripe_locate(uint64_t offset, size_t len, unsigned *ret_stripe, uint64_t *ret_at)
{
        uint64_t unit = offset / DIR_STRIPE_UNIT, in_unit = offset % DIR_STRIPE_UNIT;

        *ret_stripe = (unsigned)(unit % DIR_STRIPES);
        *ret_at = unit / DIR_STRIPES * DIR_STRIPE_UNIT + in_unit;
        return len < DIR_STRIPE_UNIT - in_unit ? len : (size_t)(DIR_STRIPE_UNIT - in_unit);
}

void dir_stripe_name(const char *name, unsigned stripe, char *out)
{
        snprintf(out, DIR_OBJECT_MAX + 8, "%s@%u", name, stripe);
}

bool dir_stripe_name_fits(const char *name)
{
        const char *last = strrchr(name, '/');
        last = last ? last + 1 : name;
        return strlen(last) + 4 <= DIR_OBJECT_MAX; /* "@15" and room to spare */
}

void dir_epoch_name(uint64_t epoch, char out[static DIR_EPOCH_HEX + 1])
{
        snprintf(out, DIR_EPOCH_HEX + 1, "%016" PRIx64, epoch);
}

bool dir_epoch_parse(const char *name, uint64_t *ret)
{
        uint64_t v = 0;

        for (int i = 0; i < DIR_EPOCH_HEX; i++) {
                char c = name[i];
                unsigned d;
                if (c >= '0' && c <= '9')
                        d = (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        d = (unsigned)(c - 'a' + 10);
                else
                        return false;
                v = (v << 4) | d;
        }
        if (name[DIR_EPOCH_HEX] != '\0' || v == 0)
                return false;
        *ret = v;
        return true;
}

int dir_tmp_name(char *out, size_t cap, const char *tag)
{
        uint64_t rnd;
        int n;

        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
                /* no entropy yet: uniqueness, not secrecy, is what we need */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                rnd = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)out;
        }
        n = snprintf(out, cap, DIR_TMP_PREFIX "%s-%ld-%016" PRIx64, tag, (long)getpid(), rnd);
        if (n < 0 || (size_t)n >= cap)
                return -ENAMETOOLONG;
        return 0;
}
