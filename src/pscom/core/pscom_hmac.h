/*
 * pscom_hmac.h - SHA-256 (FIPS 180-4), HMAC-SHA-256 (RFC 2104) and secret key files, for
 * challenge-response authentication: a peer proves that it knows the job's key by returning
 * HMAC(key, nonce || identity) for a nonce we chose, without the key crossing the wire.
 *
 * Part of libpscom and exported (plugins, pscom programs such as the gateway daemon); this
 * header includes only standard headers, so a program outside src/pscom that links libpscom
 * can use it as installed next to pscom.h.
 */
#ifndef PSCOM_HMAC_H_INCLUDED
#define PSCOM_HMAC_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#ifndef PSCOM_PLUGIN_API
#define PSCOM_PLUGIN_API __attribute__((visibility("default")))
#endif

#define PSCOM_SHA256_LEN   32         /* digest bytes */
#define PSCOM_SHA256_BLOCK 64         /* bytes per compression round; HMAC pads the key to this */
#define PSCOM_KEY_MAX      (1u << 20) /* largest max that pscom_key_load accepts */

typedef struct pscom_sha256 {
    uint32_t h[8];                   /* intermediate hash value */
    uint64_t len;                    /* bytes hashed so far */
    uint8_t buf[PSCOM_SHA256_BLOCK]; /* the partial block not yet compressed */
} pscom_sha256_t;

PSCOM_PLUGIN_API void pscom_sha256_init(pscom_sha256_t *ctx);
PSCOM_PLUGIN_API void pscom_sha256_update(pscom_sha256_t *ctx, const void *data, size_t len);
/* Writes the digest and wipes ctx (init it again to reuse it). */
PSCOM_PLUGIN_API void pscom_sha256_final(pscom_sha256_t *ctx, uint8_t out[PSCOM_SHA256_LEN]);
/* The digest of one buffer. */
PSCOM_PLUGIN_API void pscom_sha256(const void *data, size_t len, uint8_t out[PSCOM_SHA256_LEN]);

/* HMAC-SHA-256 of msg under key (any length; a key longer than 64 bytes is hashed first). */
PSCOM_PLUGIN_API void pscom_hmac_sha256(const void *key, size_t keylen, const void *msg,
                                        size_t msglen, uint8_t out[PSCOM_SHA256_LEN]);
/* The same over the concatenation msg1 || msg2 (nonce and identity without a copy). */
PSCOM_PLUGIN_API void pscom_hmac_sha256_2(const void *key, size_t keylen, const void *msg1,
                                          size_t len1, const void *msg2, size_t len2,
                                          uint8_t out[PSCOM_SHA256_LEN]);

/* 1 if the n bytes at a and b are equal, else 0, in a time that does not depend on where they
   differ (for comparing a received MAC with the expected one). */
PSCOM_PLUGIN_API int pscom_auth_equal(const void *a, const void *b, size_t n);

/* n bytes from the kernel's CSPRNG (getrandom, else /dev/urandom). 0, or -1 with errno. */
PSCOM_PLUGIN_API int pscom_random_bytes(void *buf, size_t n);

/* Read a secret key file: its bytes, without one trailing newline (so that a hex key written by
   od or xxd works). Refuses (-1, a one-line reason in why) what is not a regular file, not owned
   by the caller's effective uid, open to group or others (mode & 077), empty, or longer than max
   bytes (max at most PSCOM_KEY_MAX). 0 with *len set on success. why may be NULL. */
PSCOM_PLUGIN_API int pscom_key_load(const char *path, uint8_t *key, size_t max, size_t *len,
                                    char *why, size_t whylen);
/* Create a key file: 32 random bytes as 64 hex digits and a newline, mode 0600. Fails if path
   exists. 0, or -1 with a one-line reason in why (may be NULL). */
PSCOM_PLUGIN_API int pscom_key_create(const char *path, char *why, size_t whylen);

#endif /* PSCOM_HMAC_H_INCLUDED */
