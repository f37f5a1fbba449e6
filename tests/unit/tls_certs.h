/* SPDX-License-Identifier: MIT */
/* Throwaway certificates for the TLS tests, made with OpenSSL's API. */
#ifndef TEST_TLS_CERTS_H
#define TEST_TLS_CERTS_H

/* A self-signed P-256 certificate dir/name.pem and its key dir/name.key,
 * subject CN=cn, with the subjectAltName san (e.g. "IP:127.0.0.1,DNS:x")
 * when not NULL. It is its own CA: trust it with LUPINE_TLS_CA=dir/name.pem.
 * 0 or -1. */
int test_make_cert(const char *dir, const char *name, const char *cn, const char *san);

#endif
