/*
 * t_hmac.c - SHA-256 against the FIPS 180-2 examples and padding edge lengths, HMAC-SHA-256
 * against RFC 4231, incremental hashing, pscom_auth_equal, pscom_random_bytes and the checks of
 * pscom_key_load / pscom_key_create (pscom_hmac.h). Single process, no pscom_init needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pscom_hmac.h"
#include "testutil.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* ok() with both digests in the diagnostics */
static int digest_is(const uint8_t got[32], const char *want, const char *name)
{
    char g[65];
    hex(got, 32, g);
    if (!ok(!strcmp(g, want), "%s", name)) {
        diag("  got:  %s", g);
        diag("  want: %s", want);
        return 0;
    }
    return 1;
}

/* ---- SHA-256 --------------------------------------------------------------------------------- */

static void test_sha256(void)
{
    uint8_t d[32];
    char *a = malloc(1000000);

    /* FIPS 180-2, appendix B */
    pscom_sha256("", 0, d);
    digest_is(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
              "SHA-256(\"\")");
    pscom_sha256("abc", 3, d);
    digest_is(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
              "SHA-256(\"abc\")");
    pscom_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
    digest_is(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
              "SHA-256 of the 448-bit message (padding takes a second block)");
    memset(a, 'a', 1000000);
    pscom_sha256(a, 1000000, d);
    digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
              "SHA-256 of one million 'a'");

    /* one million 'a' in uneven pieces that cross block boundaries */
    {
        pscom_sha256_t c;
        size_t off = 0, step = 1;
        pscom_sha256_init(&c);
        while (off < 1000000) {
            size_t n = step < 1000000 - off ? step : 1000000 - off;
            pscom_sha256_update(&c, a + off, n);
            off += n;
            step = step * 3 % 257 + 1;
        }
        pscom_sha256_final(&c, d);
        digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
                  "SHA-256 of one million 'a' in pieces of 1..257 bytes");
    }
    free(a);

    /* lengths around the padding boundaries (expected values from Python's hashlib) */
    static const struct {
        size_t len;
        const char *want;
    } edge[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
    };
    uint8_t msg[1000];
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]); e++) {
        char name[96];
        uint8_t whole[32], bytes[32];
        pscom_sha256_t c;

        snprintf(name, sizeof(name), "SHA-256 of %zu bytes", edge[e].len);
        pscom_sha256(msg, edge[e].len, whole);
        digest_is(whole, edge[e].want, name);

        /* one byte at a time, with empty updates in between */
        pscom_sha256_init(&c);
        for (size_t i = 0; i < edge[e].len; i++) {
            pscom_sha256_update(&c, msg + i, 1);
            pscom_sha256_update(&c, NULL, 0);
        }
        pscom_sha256_final(&c, bytes);
        ok(!memcmp(whole, bytes, 32), "SHA-256 of %zu bytes: one byte at a time = whole",
           edge[e].len);
    }
}

/* ---- HMAC-SHA-256 ---------------------------------------------------------------------------- */

static void test_hmac(void)
{
    uint8_t key0b[20], keyaa20[20], key25[25], keyaa131[131], dd[50], cd[50], d[32], d2[32];
    memset(key0b, 0x0b, sizeof(key0b));
    memset(keyaa20, 0xaa, sizeof(keyaa20));
    for (int i = 0; i < 25; i++)
        key25[i] = (uint8_t)(i + 1);
    memset(keyaa131, 0xaa, sizeof(keyaa131));
    memset(dd, 0xdd, sizeof(dd));
    memset(cd, 0xcd, sizeof(cd));

    static const char tc6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
    static const char tc7[] = "This is a test using a larger than block-size key and a larger "
                              "than block-size data. The key needs to be hashed before being "
                              "used by the HMAC algorithm.";
    const struct {
        const void *key;
        size_t keylen;
        const void *msg;
        size_t msglen;
        const char *want, *name;
    } tc[] = {
        {key0b, 20, "Hi There", 8,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", "RFC 4231 case 1"},
        {"Jefe", 4, "what do ya want for nothing?", 28,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
         "RFC 4231 case 2 (key shorter than the output)"},
        {keyaa20, 20, dd, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
         "RFC 4231 case 3 (50 bytes 0xdd)"},
        {key25, 25, cd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
         "RFC 4231 case 4 (25-byte key)"},
        {keyaa131, 131, tc6, sizeof(tc6) - 1,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
         "RFC 4231 case 6 (131-byte key: hashed first)"},
        {keyaa131, 131, tc7, sizeof(tc7) - 1,
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
         "RFC 4231 case 7 (131-byte key, 152-byte message)"},
    };
    for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
        char name[128];
        pscom_hmac_sha256(tc[i].key, tc[i].keylen, tc[i].msg, tc[i].msglen, d);
        snprintf(name, sizeof(name), "HMAC-SHA-256 %s", tc[i].name);
        digest_is(d, tc[i].want, name);

        /* every split into two parts gives the same MAC */
        int same = 1;
        for (size_t s = 0; s <= tc[i].msglen; s++) {
            pscom_hmac_sha256_2(tc[i].key, tc[i].keylen, tc[i].msg, s, (const char *)tc[i].msg + s,
                                tc[i].msglen - s, d2);
            same &= !memcmp(d, d2, 32);
        }
        ok(same, "HMAC-SHA-256 %s: pscom_hmac_sha256_2 at every split point = one part",
           tc[i].name);
    }

    /* a 64-byte key is used as it is, a 65-byte one hashed: both differ from a 63-byte key */
    uint8_t k[65], m63[32], m64[32], m65[32];
    memset(k, 0x42, sizeof(k));
    pscom_hmac_sha256(k, 63, "x", 1, m63);
    pscom_hmac_sha256(k, 64, "x", 1, m64);
    pscom_hmac_sha256(k, 65, "x", 1, m65);
    ok(memcmp(m63, m64, 32) && memcmp(m64, m65, 32) && memcmp(m63, m65, 32),
       "HMAC-SHA-256: keys of 63, 64 and 65 bytes give different MACs");
}

/* ---- auth_equal, random bytes -----------------------------------------------------------------
 */

static void test_equal_random(void)
{
    uint8_t a[32], b[32], big[1 << 20];

    ok(pscom_random_bytes(a, sizeof(a)) == 0, "pscom_random_bytes: 32 bytes");
    memcpy(b, a, sizeof(a));
    ok(pscom_auth_equal(a, b, 32) == 1, "pscom_auth_equal: equal buffers give 1");
    ok(pscom_auth_equal(a, b, 0) == 1, "pscom_auth_equal: zero length gives 1");
    int all = 1;
    for (int i = 0; i < 32; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1 << bit);
            all &= pscom_auth_equal(a, b, 32) == 0;
            b[i] ^= (uint8_t)(1 << bit);
        }
    ok(all, "pscom_auth_equal: a difference in any one bit gives 0");

    ok(pscom_random_bytes(b, sizeof(b)) == 0 && memcmp(a, b, 32),
       "pscom_random_bytes: two draws differ");
    /* getrandom may return less than asked (signals, more than 32 MiB): the loop fills it */
    memset(big, 0, sizeof(big));
    ok(pscom_random_bytes(big, sizeof(big)) == 0, "pscom_random_bytes: 1 MiB");
    size_t zero = 0;
    for (size_t i = 0; i + 8 <= sizeof(big); i += 8) {
        uint64_t w;
        memcpy(&w, big + i, 8);
        zero += !w;
    }
    ok(zero == 0, "pscom_random_bytes: 1 MiB without an all-zero 8-byte word (%zu)", zero);
    ok(pscom_random_bytes(NULL, 0) == 0, "pscom_random_bytes: 0 bytes");
}

/* ---- key files --------------------------------------------------------------------------------
 */

static void write_file(const char *path, const char *text, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0)
        diag("writing %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* pscom_key_load of path is refused, with a reason that mentions what */
static void refused(const char *path, size_t max, const char *what, const char *name)
{
    uint8_t key[256];
    size_t len = 12345;
    char why[512] = "";
    int rc = pscom_key_load(path, key, max, &len, why, sizeof(why));
    if (!ok(rc == -1 && strstr(why, what) && !strchr(why, '\n') && len == 12345,
            "pscom_key_load refuses %s (\"%s\")", name, why))
        diag("  rc %d, len %zu, expected the reason to mention '%s'", rc, len, what);
}

static void test_keys(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200], path2[4200], why[512];
    uint8_t key[256], d1[32], d2[32];
    size_t len = 0;
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/t_hmac.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!ok(mkdtemp(dir) != NULL, "temporary directory %s", dir))
        return;

    /* created key: 64 hex digits + newline, 0600, loads as 64 bytes */
    snprintf(path, sizeof(path), "%s/key", dir);
    why[0] = 0;
    int created = pscom_key_create(path, why, sizeof(why));
    ok(created == 0, "pscom_key_create %s%s%s", path, *why ? ": " : "", why);
    /* the calls before ok(): its message arguments are read in an unspecified order */
    memset(&st, 0, sizeof(st));
    int rc = stat(path, &st);
    ok(rc == 0 && (st.st_mode & 07777) == 0600 && st.st_size == 65,
       "created key file: mode 0600 (%04o), 65 bytes (%lld)", (unsigned)(st.st_mode & 07777),
       (long long)st.st_size);
    why[0] = 0;
    rc = pscom_key_load(path, key, sizeof(key), &len, why, sizeof(why));
    ok(rc == 0 && len == 64,
       "pscom_key_load accepts the created key: 64 bytes without the newline (%zu%s%s)", len,
       *why ? "; " : "", why);
    int hexdigits = 1;
    for (size_t i = 0; i < len; i++)
        hexdigits &= !!strchr("0123456789abcdef", key[i]);
    ok(hexdigits, "created key: lowercase hex digits");
    ok(pscom_key_load(path, key, 64, &len, NULL, 0) == 0 && len == 64,
       "pscom_key_load: max 64 takes the 64-digit key (the newline does not count)");
    refused(path, 63, "longer than 63", "a key longer than max");

    /* a second key differs; creating over an existing file fails and leaves it alone */
    snprintf(path2, sizeof(path2), "%s/key2", dir);
    uint8_t key2[256];
    size_t len2 = 0;
    ok(pscom_key_create(path2, NULL, 0) == 0 &&
           pscom_key_load(path2, key2, sizeof(key2), &len2, NULL, 0) == 0 && len2 == 64 &&
           memcmp(key, key2, 64),
       "a second created key differs from the first");
    uint8_t before[256];
    size_t blen = 0;
    pscom_key_load(path, before, sizeof(before), &blen, NULL, 0);
    why[0] = 0;
    created = pscom_key_create(path, why, sizeof(why));
    ok(created == -1 && strstr(why, "exists"), "pscom_key_create refuses an existing file (\"%s\")",
       why);
    ok(pscom_key_load(path, key, sizeof(key), &len, NULL, 0) == 0 && len == blen &&
           !memcmp(key, before, len),
       "the existing key file is unchanged");

    /* the loaded key works as an HMAC key, and a different key gives another MAC */
    pscom_hmac_sha256_2(key, len, "nonce", 5, "rank 3", 6, d1);
    pscom_hmac_sha256_2(key2, len2, "nonce", 5, "rank 3", 6, d2);
    ok(!pscom_auth_equal(d1, d2, 32), "MACs under two different keys differ");

    /* a limit so large that room for it could wrap around */
    refused(path, (size_t)-1, "above", "a limit above PSCOM_KEY_MAX");

    /* 0600 even under a umask that would take the owner's read bit */
    snprintf(path2, sizeof(path2), "%s/key3", dir);
    mode_t old = umask(0277);
    created = pscom_key_create(path2, NULL, 0);
    umask(old);
    memset(&st, 0, sizeof(st));
    rc = stat(path2, &st);
    ok(created == 0 && rc == 0 && (st.st_mode & 07777) == 0600,
       "pscom_key_create under umask 0277: mode 0600 (%04o)", (unsigned)(st.st_mode & 07777));
    unlink(path2);

    /* refusals */
    chmod(path, 0644);
    refused(path, sizeof(key), "0644", "a key file of mode 0644");
    chmod(path, 0640);
    refused(path, sizeof(key), "0640", "a key file of mode 0640");
    chmod(path, 0602);
    refused(path, sizeof(key), "0602", "a key file of mode 0602");
    chmod(path, 0400);
    ok(pscom_key_load(path, key, sizeof(key), &len, NULL, 0) == 0,
       "pscom_key_load accepts mode 0400");
    chmod(path, 0600);
    refused(dir, sizeof(key), "not a regular file", "a directory");

    snprintf(path2, sizeof(path2), "%s/empty", dir);
    write_file(path2, "", 0, 0600);
    refused(path2, sizeof(key), "empty", "an empty file");
    write_file(path2, "\n", 1, 0600);
    refused(path2, sizeof(key), "empty", "a file of one newline");
    unlink(path2);
    refused(path2, sizeof(key), "No such file", "a missing file");

    /* raw bytes are taken as they are; one trailing newline (or CR LF) is stripped */
    snprintf(path2, sizeof(path2), "%s/raw", dir);
    write_file(path2, "se\0cret\n\n", 9, 0600);
    rc = pscom_key_load(path2, key, sizeof(key), &len, NULL, 0);
    ok(rc == 0 && len == 8 && !memcmp(key, "se\0cret\n", 8),
       "raw key with a NUL byte: only one trailing newline stripped (%zu bytes)", len);
    write_file(path2, "abcd\r\n", 6, 0600);
    rc = pscom_key_load(path2, key, sizeof(key), &len, NULL, 0);
    ok(rc == 0 && len == 4 && !memcmp(key, "abcd", 4), "CR LF stripped (%zu bytes)", len);
    write_file(path2, "abcd", 4, 0600);
    ok(pscom_key_load(path2, key, 4, &len, NULL, 0) == 0 && len == 4,
       "a key of exactly max bytes without newline");
    write_file(path2, "abcde", 5, 0600);
    refused(path2, 4, "longer than 4", "5 bytes with max 4");
    write_file(path2, "abcde\n", 6, 0600);
    refused(path2, 4, "longer than 4", "5 bytes and a newline with max 4");
    unlink(path2);

    /* a FIFO must be refused, not block */
    snprintf(path2, sizeof(path2), "%s/fifo", dir);
    if (mkfifo(path2, 0600) == 0) {
        refused(path2, sizeof(key), "not a regular file", "a FIFO (without blocking)");
        unlink(path2);
    } else {
        tap_skip(strerror(errno), "pscom_key_load refuses a FIFO");
    }

    /* another owner: only testable as root (a file given to another uid) */
    if (geteuid() == 0) {
        if (chown(path, 65534, 65534) == 0)
            refused(path, sizeof(key), "owned by uid 65534", "a key file owned by another uid");
        else
            tap_skip(strerror(errno), "pscom_key_load refuses a file of another owner");
    } else {
        tap_skip("not root", "pscom_key_load refuses a file of another owner");
    }

    unlink(path);
    snprintf(path2, sizeof(path2), "%s/key2", dir);
    unlink(path2);
    ok(rmdir(dir) == 0, "temporary directory removed");
}

int main(void)
{
    test_sha256();
    test_hmac();
    test_equal_random();
    test_keys();
    return tap_done();
}
