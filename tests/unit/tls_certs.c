/* SPDX-License-Identifier: MIT */
#include "tls_certs.h"

#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static int add_ext(X509 *x, int nid, const char *value)
{
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!e)
                return -1;
        int ok = X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
        return ok ? 0 : -1;
}

static int write_pem(const char *dir, const char *name, const char *ext, X509 *x, EVP_PKEY *k)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
        FILE *f = fopen(path, "w");
        if (!f)
                return -1;
        int ok = x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
        return fclose(f) == 0 && ok ? 0 : -1;
}

int test_make_cert(const char *dir, const char *name, const char *cn, const char *san)
{
        static long serial = 1;
        EVP_PKEY *k = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        int rc = -1;

        if (!k || !x)
                goto out;
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
        X509_gmtime_adj(X509_getm_notBefore(x), -3600);
        X509_gmtime_adj(X509_getm_notAfter(x), 7 * 86400);
        X509_set_pubkey(x, k);
        X509_NAME *n = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
        X509_set_issuer_name(x, n);
        if (add_ext(x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
            (san && add_ext(x, NID_subject_alt_name, san) < 0))
                goto out;
        if (!X509_sign(x, k, EVP_sha256()))
                goto out;
        if (write_pem(dir, name, "pem", x, NULL) < 0 || write_pem(dir, name, "key", NULL, k) < 0)
                goto out;
        rc = 0;
out:
        X509_free(x);
        EVP_PKEY_free(k);
        return rc;
}
