/* SPDX-License-Identifier: MIT */
/* Settings read from the environment, shared by shim and daemon. */
#ifndef LUP_ENV_H
#define LUP_ENV_H

/* A whole number from 0 to max in variable `name`; def when it is unset or
 * empty, and def with a warning naming the variable when it is not valid. */
unsigned lup_env_uint(const char *name, unsigned def, unsigned max);

#endif
