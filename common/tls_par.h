/* SPDX-License-Identifier: MIT */
/* Sealing and opening TLS records on a few threads at once (tls_par.c);
 * private to common/tls_record.c. */
#ifndef LUP_TLS_PAR_H
#define LUP_TLS_PAR_H

#define LUP_PAR_MAX_LANES 8

/* How many lanes a batch may use: 1 (the caller) plus the helpers, from
 * LUPINE_TLS_THREADS, else a quarter of the CPUs, at most
 * LUP_PAR_MAX_LANES. */
int lup_par_lanes(void);
/* Runs fn(arg, i, slot) for every i in [0, n), on the caller and the
 * helpers; slot (< lup_par_lanes()) says which lane runs it, so that each
 * lane uses its own cipher context. Returns when all have run. */
void lup_par_run(int n, void (*fn)(void *arg, int i, int slot), void *arg);

#endif
