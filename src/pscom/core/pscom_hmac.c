/*
 * pscom_hmac.c - SHA-256 after FIPS 180-4 (section 6.2), HMAC after RFC 2104, key files and
 * random bytes for challenge-response authentication. No external crypto library: libpscom
 * must not depend on one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pscom_hmac.h"

/* ---- SHA-256 ------------------------------------------------------------------------------- */

/* FIPS 180-4 4.2.2: first 32 bits of the fractional parts of the cube roots of the first 64
   primes */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

/* FIPS 180-4 6.2.2: one 512-bit block into the hash value */
static void sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh;

    for (int t = 0; t < 16; t++)
        w[t] = load_be32(p + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = s1 + w[t - 7] + s0 + w[t - 16];
    }
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
    /* the schedule is derived from key material when hashing an HMAC key */
    explicit_bzero(w, sizeof(w));
}

void pscom_sha256_init(pscom_sha256_t *ctx)
{
    /* FIPS 180-4 5.3.3: first 32 bits of the fractional parts of the square roots of the first
       8 primes */
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->h, h0, sizeof(h0));
    ctx->len = 0;
}

void pscom_sha256_update(pscom_sha256_t *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t fill = ctx->len % PSCOM_SHA256_BLOCK;

    if (!len) /* data may then be NULL, which memcpy must not get */
        return;
    ctx->len += len;
    if (fill) {
        size_t n = PSCOM_SHA256_BLOCK - fill;
        if (len < n) {
            memcpy(ctx->buf + fill, p, len);
            return;
        }
        memcpy(ctx->buf + fill, p, n);
        sha256_block(ctx->h, ctx->buf);
        p += n;
        len -= n;
    }
    for (; len >= PSCOM_SHA256_BLOCK; p += PSCOM_SHA256_BLOCK, len -= PSCOM_SHA256_BLOCK)
        sha256_block(ctx->h, p);
    if (len)
        memcpy(ctx->buf, p, len);
}

void pscom_sha256_final(pscom_sha256_t *ctx, uint8_t out[PSCOM_SHA256_LEN])
{
    /* FIPS 180-4 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, the length in bits (64 bits) */
    size_t fill = ctx->len % PSCOM_SHA256_BLOCK;
    uint64_t bits = ctx->len * 8;

    ctx->buf[fill++] = 0x80;
    if (fill > PSCOM_SHA256_BLOCK - 8) {
        memset(ctx->buf + fill, 0, PSCOM_SHA256_BLOCK - fill);
        sha256_block(ctx->h, ctx->buf);
        fill = 0;
    }
    memset(ctx->buf + fill, 0, PSCOM_SHA256_BLOCK - 8 - fill);
    store_be32(ctx->buf + 56, (uint32_t)(bits >> 32));
    store_be32(ctx->buf + 60, (uint32_t)bits);
    sha256_block(ctx->h, ctx->buf);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, ctx->h[i]);
    explicit_bzero(ctx, sizeof(*ctx));
}

void pscom_sha256(const void *data, size_t len, uint8_t out[PSCOM_SHA256_LEN])
{
    pscom_sha256_t ctx;
    pscom_sha256_init(&ctx);
    pscom_sha256_update(&ctx, data, len);
    pscom_sha256_final(&ctx, out);
}

/* ---- HMAC-SHA-256 -------------------------------------------------------------------------- */

/* RFC 2104: H(K ^ opad || H(K ^ ipad || text)), K the key zero-padded to the block size (a
   longer key is replaced by its digest first) */
void pscom_hmac_sha256_2(const void *key, size_t keylen, const void *msg1, size_t len1,
                         const void *msg2, size_t len2, uint8_t out[PSCOM_SHA256_LEN])
{
    uint8_t k[PSCOM_SHA256_BLOCK] = {0}, pad[PSCOM_SHA256_BLOCK], inner[PSCOM_SHA256_LEN];
    pscom_sha256_t ctx;

    if (keylen > PSCOM_SHA256_BLOCK)
        pscom_sha256(key, keylen, k);
    else if (keylen)
        memcpy(k, key, keylen);

    for (int i = 0; i < PSCOM_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    pscom_sha256_init(&ctx);
    pscom_sha256_update(&ctx, pad, sizeof(pad));
    if (len1)
        pscom_sha256_update(&ctx, msg1, len1);
    if (len2)
        pscom_sha256_update(&ctx, msg2, len2);
    pscom_sha256_final(&ctx, inner);

    for (int i = 0; i < PSCOM_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    pscom_sha256_init(&ctx);
    pscom_sha256_update(&ctx, pad, sizeof(pad));
    pscom_sha256_update(&ctx, inner, sizeof(inner));
    pscom_sha256_final(&ctx, out);

    /* no copies of the key left on the stack */
    explicit_bzero(k, sizeof(k));
    explicit_bzero(pad, sizeof(pad));
    explicit_bzero(inner, sizeof(inner));
}

void pscom_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                       uint8_t out[PSCOM_SHA256_LEN])
{
    pscom_hmac_sha256_2(key, keylen, msg, msglen, NULL, 0, out);
}

int pscom_auth_equal(const void *a, const void *b, size_t n)
{
    /* volatile reads: the compiler may not stop at the first difference */
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

/* ---- random bytes -------------------------------------------------------------------------- */

static int urandom_bytes(uint8_t *p, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            errno = e;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    close(fd);
    return 0;
}

int pscom_random_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        /* blocks only until the pool is initialised at boot; returns at most 32 MiB at once
           and may be interrupted by a signal after 256 bytes */
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) /* ENOSYS (old kernel), EPERM (seccomp filter) */
            return urandom_bytes(p, n);
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* ---- key files ----------------------------------------------------------------------------- */

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t whylen, const char *fmt, ...)
{
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int pscom_key_load(const char *path, uint8_t *key, size_t max, size_t *len, char *why,
                   size_t whylen)
{
    struct stat st;
    uint8_t *buf;
    size_t cap, n = 0;
    int fd, e;

    /* O_NONBLOCK: opening a FIFO must not hang; fstat of what we opened, not of the name,
       so that the checks hold for the bytes we read */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return fail(why, whylen, "key file %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        e = errno;
        close(fd);
        return fail(why, whylen, "key file %s: fstat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, whylen, "key file %s: not a regular file", path);
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return fail(why, whylen, "key file %s: owned by uid %u, not by us (uid %u)", path,
                    (unsigned)st.st_uid, (unsigned)geteuid());
    }
    if (st.st_mode & 077) {
        close(fd);
        return fail(why, whylen,
                    "key file %s: mode %04o gives group or others access (chmod 600 it)", path,
                    (unsigned)(st.st_mode & 07777));
    }

    /* room for the key, a CR LF to strip and one byte more to see that it is too long; a
       limit that large is a caller's mistake, and max + 3 must not wrap */
    if (max > PSCOM_KEY_MAX) {
        close(fd);
        return fail(why, whylen, "key file %s: a limit of %zu bytes is above %u", path, max,
                    PSCOM_KEY_MAX);
    }
    cap = max + 3;
    buf = malloc(cap);
    if (!buf) {
        close(fd);
        return fail(why, whylen, "key file %s: out of memory", path);
    }
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            e = errno;
            close(fd);
            explicit_bzero(buf, n);
            free(buf);
            return fail(why, whylen, "key file %s: read: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);

    if (n < cap && n && buf[n - 1] == '\n') {
        n--;
        if (n && buf[n - 1] == '\r')
            n--;
    }
    if (!n || n > max) {
        explicit_bzero(buf, n < cap ? n : cap);
        free(buf);
        if (!n)
            return fail(why, whylen, "key file %s: empty", path);
        return fail(why, whylen, "key file %s: longer than %zu bytes", path, max);
    }
    memcpy(key, buf, n);
    explicit_bzero(buf, n);
    free(buf);
    *len = n;
    return 0;
}

int pscom_key_create(const char *path, char *why, size_t whylen)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t raw[32];
    char text[2 * sizeof(raw) + 1];
    size_t off = 0;
    int fd, e;

    if (pscom_random_bytes(raw, sizeof(raw)) < 0)
        return fail(why, whylen, "key file %s: no random bytes: %s", path, strerror(errno));
    for (size_t i = 0; i < sizeof(raw); i++) {
        text[2 * i] = hex[raw[i] >> 4];
        text[2 * i + 1] = hex[raw[i] & 15];
    }
    text[sizeof(text) - 1] = '\n';
    explicit_bzero(raw, sizeof(raw));

    /* O_EXCL: never overwrite a key others may share; O_NOFOLLOW: nor write through a link */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        e = errno;
        explicit_bzero(text, sizeof(text));
        return fail(why, whylen, "key file %s: %s", path, strerror(e));
    }
    e = 0;
    /* 0600 whatever the umask: a umask that takes the owner's read bit would make it useless */
    if (fchmod(fd, 0600) < 0)
        e = errno;
    while (!e && off < sizeof(text)) {
        ssize_t w = write(fd, text + off, sizeof(text) - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : EIO;
            break;
        }
        off += (size_t)w;
    }
    explicit_bzero(text, sizeof(text));
    /* a key that did not reach the disk whole is worse than none */
    if (!e && fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    if (e) {
        unlink(path);
        return fail(why, whylen, "key file %s: write: %s", path, strerror(e));
    }
    return 0;
}
