/* psnam_region.c - region files: create, open and check, seal (psnam_region.h) */
#include "psnam_region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int psnam_shm_path(char *buf, size_t len, const char *dir, const char *name, int seg)
{
    int n = snprintf(buf, len, "%s/" PSNAM_SHM_PREFIX "%s.%d", dir, name, seg);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

static size_t sizes_len(const psnam_header_t *h)
{
    return h->seg == -1 ? (size_t)h->nseg * sizeof(uint64_t) : 0;
}

static void header_digest(const psnam_header_t *h, uint8_t out[PSCOM_SHA256_LEN])
{
    pscom_sha256_t ctx;
    pscom_sha256_init(&ctx);
    pscom_sha256_update(&ctx, h, offsetof(psnam_header_t, checksum));
    pscom_sha256_update(&ctx, h + 1, sizes_len(h));
    pscom_sha256_final(&ctx, out);
}

void psnam_header_seal(psnam_header_t *h)
{
    header_digest(h, h->checksum);
}

static int fail(int err, char *why, size_t whylen, const char *fmt, const char *path, int e)
{
    if (why)
        snprintf(why, whylen, fmt, path, strerror(e));
    return err;
}

int psnam_file_create(const char *path, const psnam_header_t *h, const uint64_t *sizes,
                      psnam_file_t *f, char *why, size_t whylen)
{
    size_t hdr_len = sizeof(*h) + sizes_len(h);
    size_t header_size = (hdr_len + PSNAM_PAGE - 1) / PSNAM_PAGE * PSNAM_PAGE;
    size_t len = header_size + h->size;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fail(errno == EEXIST   ? PSNAM_E_EXIST
                    : errno == EACCES ? PSNAM_E_ACCESS
                                      : PSNAM_E_IO,
                    why, whylen, "%s: %s", path, errno);
    int rc = posix_fallocate(fd, 0, (off_t)len);
    if (rc) {
        unlink(path);
        close(fd);
        return fail(rc == ENOSPC ? PSNAM_E_NOSPACE : PSNAM_E_IO, why, whylen,
                    "%s: cannot reserve the region's memory: %s", path, rc);
    }
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) {
        unlink(path);
        return fail(PSNAM_E_IO, why, whylen, "%s: mmap: %s", path, e);
    }
    psnam_header_t *m = map;
    *m = *h;
    memcpy(m->magic, PSNAM_MAGIC, sizeof(m->magic));
    m->version = PSNAM_FORMAT_VERSION;
    m->header_size = (uint32_t)header_size;
    m->uid = (uint32_t)geteuid();
    m->created = (int64_t)time(NULL);
    m->attached = 0;
    if (sizes_len(h))
        memcpy(m + 1, sizes, sizes_len(h));
    psnam_header_seal(m);
    f->hdr = m;
    f->sizes = h->seg == -1 ? (uint64_t *)(m + 1) : NULL;
    f->data = (char *)map + header_size;
    f->map_len = len;
    return PSNAM_OK;
}

int psnam_file_open(const char *path, psnam_file_t *f, char *why, size_t whylen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (e == EACCES && stat(path, &st) == 0 && why) {
            snprintf(why, whylen, "%s belongs to uid %u, not to uid %u", path, (unsigned)st.st_uid,
                     (unsigned)geteuid());
            return PSNAM_E_ACCESS;
        }
        return fail(e == ENOENT   ? PSNAM_E_NOENT
                    : e == EACCES ? PSNAM_E_ACCESS
                                  : PSNAM_E_IO,
                    why, whylen, "%s: %s", path, e);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail(PSNAM_E_IO, why, whylen, "%s: %s", path, errno);
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        if (why)
            snprintf(why, whylen, "%s belongs to uid %u, not to uid %u", path, (unsigned)st.st_uid,
                     (unsigned)geteuid());
        return PSNAM_E_ACCESS;
    }
    if (st.st_mode & 077) {
        close(fd);
        if (why)
            snprintf(why, whylen, "%s is open to other users (mode %03o): refused", path,
                     (unsigned)(st.st_mode & 0777));
        return PSNAM_E_ACCESS;
    }
    psnam_header_t h;
    if (st.st_size < (off_t)sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        memcmp(h.magic, PSNAM_MAGIC, sizeof(h.magic)) != 0) {
        close(fd);
        if (why)
            snprintf(why, whylen, "%s is not a psnam region (no header)", path);
        return PSNAM_E_IO;
    }
    if (h.version != PSNAM_FORMAT_VERSION) {
        close(fd);
        if (why)
            snprintf(why, whylen, "%s has format version %u, this library reads version %u", path,
                     h.version, PSNAM_FORMAT_VERSION);
        return PSNAM_E_IO;
    }
    size_t need = (size_t)h.header_size + h.size;
    if (h.header_size % PSNAM_PAGE || h.header_size < sizeof(h) + sizes_len(&h) ||
        (uint64_t)st.st_size < need || h.size > (uint64_t)st.st_size) {
        close(fd);
        if (why)
            snprintf(why, whylen, "%s is truncated or damaged (%lld bytes, its header says %zu)",
                     path, (long long)st.st_size, need);
        return PSNAM_E_IO;
    }
    void *map = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return fail(PSNAM_E_IO, why, whylen, "%s: mmap: %s", path, e);
    uint8_t sum[PSCOM_SHA256_LEN];
    header_digest(map, sum);
    if (!pscom_auth_equal(sum, ((psnam_header_t *)map)->checksum, sizeof(sum))) {
        munmap(map, need);
        if (why)
            snprintf(why, whylen, "%s: header checksum mismatch (the region is corrupted)", path);
        return PSNAM_E_IO;
    }
    f->hdr = map;
    f->sizes = h.seg == -1 ? (uint64_t *)(f->hdr + 1) : NULL;
    f->data = (char *)map + h.header_size;
    f->map_len = need;
    return PSNAM_OK;
}

void psnam_file_touch(psnam_file_t *f)
{
    f->hdr->attached = (int64_t)time(NULL);
    psnam_header_seal(f->hdr);
}

void psnam_file_close(psnam_file_t *f)
{
    if (!f->hdr)
        return;
    msync(f->hdr, f->map_len, MS_SYNC);
    munmap(f->hdr, f->map_len);
    f->hdr = NULL;
}
