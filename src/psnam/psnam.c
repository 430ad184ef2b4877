/*
 * psnam - list, inspect and free persistent PSNAM regions.
 *
 *   psnam [--server HOST:PORT] [--key FILE] [--dir DIR] list | info NAME | free NAME | free --all
 *
 * Without --server: the shm regions of this node (files psnam.NAME.SEG in --dir, default
 * PSP_PSNAM_DIR or /dev/shm). With --server: the regions on that psnamd that the key opens
 * (--key, default PSP_NAM_KEY or ~/.psnam.key). Exit status 0, 1 on an error, 2 on bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pscom.h"
#include "psnam_client.h"
#include "psnam_region.h"

static const char *dir, *server, *key_file;

static void when(int64_t t, char *buf, size_t len)
{
    if (!t) {
        snprintf(buf, len, "-");
        return;
    }
    time_t tt = (time_t)t;
    strftime(buf, len, "%Y-%m-%dT%H:%M:%S", localtime(&tt));
}

static void print_head(void)
{
    printf("%-24s %-4s %14s %8s %8s %-19s %-19s\n", "NAME", "KIND", "BYTES", "SEGMENTS", "OWNER",
           "CREATED", "LAST ATTACHED");
}

static void print_row(const char *name, const char *kind, uint64_t bytes, const char *segs,
                      unsigned uid, int64_t created, int64_t attached)
{
    char c[32], a[32];
    when(created, c, sizeof(c));
    when(attached, a, sizeof(a));
    printf("%-24s %-4s %14llu %8s %8u %-19s %-19s\n", name, kind, (unsigned long long)bytes, segs,
           uid, c, a);
}

/* ---- shm regions of this node ---- */

typedef struct seg {
    char name[PSNAM_NAME_MAX];
    int seg;
    char path[4200];
} seg_t;

/* the segment files in dir (name filter NULL: all) */
static int scan(const char *name, seg_t **out)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "psnam: %s: %s\n", dir, strerror(errno));
        exit(1);
    }
    int n = 0, max = 0;
    seg_t *v = NULL;
    struct dirent *e;
    size_t pl = strlen(PSNAM_SHM_PREFIX);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, PSNAM_SHM_PREFIX, pl) != 0)
            continue;
        const char *rest = e->d_name + pl, *dot = strrchr(rest, '.');
        if (!dot || dot == rest || (size_t)(dot - rest) >= PSNAM_NAME_MAX)
            continue;
        char *end;
        long s = strtol(dot + 1, &end, 10);
        if (*end || s < 0)
            continue;
        if (n == max && !(v = realloc(v, (max = max ? 2 * max : 16) * sizeof(*v)))) {
            exit(1);
        }
        snprintf(v[n].name, sizeof(v[n].name), "%.*s", (int)(dot - rest), rest);
        if (name && strcmp(v[n].name, name) != 0)
            continue;
        v[n].seg = (int)s;
        snprintf(v[n].path, sizeof(v[n].path), "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    *out = v;
    return n;
}

static int by_name(const void *a, const void *b)
{
    const seg_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->seg - y->seg;
}

static int shm_show(const char *name)
{
    seg_t *v;
    int n = scan(name, &v), rc = 0;
    if (name && !n) {
        fprintf(stderr, "psnam: no shm region %s on this node (%s)\n", name, dir);
        return 1;
    }
    qsort(v, (size_t)n, sizeof(*v), by_name);
    print_head();
    for (int i = 0; i < n;) {
        int j = i;
        uint64_t bytes = 0;
        unsigned nseg = 0, uid = 0;
        int64_t created = 0, attached = 0;
        char bad[256] = "";
        for (; j < n && strcmp(v[j].name, v[i].name) == 0; j++) {
            psnam_file_t f;
            char why[256];
            if (psnam_file_open(v[j].path, &f, why, sizeof(why)) != PSNAM_OK) {
                struct stat st;
                snprintf(bad, sizeof(bad), "%s", why);
                if (stat(v[j].path, &st) == 0)
                    uid = st.st_uid;
                continue;
            }
            bytes += f.hdr->size;
            nseg = f.hdr->nseg;
            uid = f.hdr->uid;
            created = f.hdr->created;
            if (f.hdr->attached > attached)
                attached = f.hdr->attached;
            if (name)
                printf("  segment %d: %llu bytes, disp_unit %u, %s\n", v[j].seg,
                       (unsigned long long)f.hdr->size, f.hdr->disp_unit, v[j].path);
            psnam_file_close(&f);
        }
        char segs[32];
        snprintf(segs, sizeof(segs), "%d/%u", j - i, nseg);
        print_row(v[i].name, "shm", bytes, segs, uid, created, attached);
        if (bad[0]) {
            printf("  ! %s\n", bad);
            rc = 1;
        }
        i = j;
    }
    free(v);
    return rc;
}

static int shm_free(const char *name)
{
    seg_t *v;
    int n = scan(name, &v), rc = 0, freed = 0;
    if (name && !n) {
        fprintf(stderr, "psnam: no shm region %s on this node (%s)\n", name, dir);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (lstat(v[i].path, &st) != 0)
            continue;
        if (st.st_uid != geteuid()) {
            if (name) {
                fprintf(stderr, "psnam: %s belongs to uid %u: not freed\n", v[i].path,
                        (unsigned)st.st_uid);
                rc = 1;
            }
            continue;
        }
        if (unlink(v[i].path) != 0) {
            fprintf(stderr, "psnam: %s: %s\n", v[i].path, strerror(errno));
            rc = 1;
        } else {
            freed++;
        }
    }
    printf("freed %d segment file%s\n", freed, freed == 1 ? "" : "s");
    free(v);
    return rc;
}

/* ---- regions on a psnamd ---- */

static psnam_client_t *nam;
static uint8_t verifier[PSNAM_MAC_LEN];

static int nam_call(int type, const char *name, void *result, size_t rlen, size_t *got)
{
    psnam_open_t o = {0};
    snprintf(o.name, sizeof(o.name), "%s", name ? name : "");
    psnam_proof(verifier, psnam_nonce(nam), o.name, o.cred);
    psnam_msg_t m = {.type = (uint8_t)type};
    char why[PSNAM_REASON_MAX + 1] = "";
    int st = psnam_call(nam, &m, &o, sizeof(o), result, rlen, got, NULL, why, sizeof(why));
    if (st != PSNAM_OK)
        fprintf(stderr, "psnam: %s: %s\n", psnam_server(nam), why);
    return st;
}

static void nam_row(const psnam_info_t *i)
{
    char segs[32];
    snprintf(segs, sizeof(segs), "%u", i->nseg);
    print_row(i->name, "nam", i->size, segs, i->uid, i->created, i->attached);
}

static int nam_list(psnam_info_t **out, size_t *n)
{
    size_t max = 4096, got = 0;
    psnam_info_t *v = calloc(max, sizeof(*v));
    if (!v || nam_call(PSNAM_LIST, NULL, v, max * sizeof(*v), &got) != PSNAM_OK)
        return 1;
    *out = v;
    *n = got / sizeof(*v);
    return 0;
}

static int nam_cmd(const char *cmd, const char *name)
{
    if (!strcmp(cmd, "info")) {
        psnam_info_t i;
        if (nam_call(PSNAM_INFO, name, &i, sizeof(i), NULL) != PSNAM_OK)
            return 1;
        print_head();
        nam_row(&i);
        printf("  largest segment %llu bytes, %u client%s attached, %s\n",
               (unsigned long long)i.seg_size, i.clients, i.clients == 1 ? "" : "s",
               i.persistent ? "persistent" : "freed with its last window");
        return 0;
    }
    if (!strcmp(cmd, "free") && name) {
        if (nam_call(PSNAM_FREE, name, NULL, 0, NULL) != PSNAM_OK)
            return 1;
        printf("freed %s on %s\n", name, psnam_server(nam));
        return 0;
    }
    psnam_info_t *v;
    size_t n;
    if (nam_list(&v, &n) != 0)
        return 1;
    int rc = 0;
    if (!strcmp(cmd, "list")) {
        print_head();
        for (size_t i = 0; i < n; i++)
            nam_row(&v[i]);
    } else { /* free --all */
        for (size_t i = 0; i < n; i++) {
            if (nam_call(PSNAM_FREE, v[i].name, NULL, 0, NULL) != PSNAM_OK)
                rc = 1;
            else
                printf("freed %s on %s\n", v[i].name, psnam_server(nam));
        }
    }
    free(v);
    return rc;
}

static void usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: psnam [--server HOST:PORT] [--key FILE] [--dir DIR] COMMAND\n"
            "  list          regions: shm ones of this node, or those on --server\n"
            "  info NAME     one region (and its segments)\n"
            "  free NAME     remove a region\n"
            "  free --all    remove all of your regions\n");
    exit(rc);
}

int main(int argc, char **argv)
{
    dir = getenv("PSP_PSNAM_DIR");
    if (!dir || !*dir)
        dir = "/dev/shm";
    key_file = getenv("PSP_NAM_KEY");
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--all"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            usage(0);
        if (i + 1 >= argc)
            usage(2);
        if (!strcmp(argv[i], "--server"))
            server = argv[++i];
        else if (!strcmp(argv[i], "--key"))
            key_file = argv[++i];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[++i];
        else
            usage(2);
    }
    if (i >= argc)
        usage(2);
    const char *cmd = argv[i++], *name = i < argc ? argv[i++] : NULL;
    if (i < argc)
        usage(2);
    int all = name && !strcmp(name, "--all");
    if (!strcmp(cmd, "list")) {
        if (name)
            usage(2);
    } else if (!strcmp(cmd, "info")) {
        if (!name || all)
            usage(2);
    } else if (!strcmp(cmd, "free")) {
        if (!name)
            usage(2);
    } else {
        usage(2);
    }
    if (name && !all && !psnam_name_ok(name)) {
        fprintf(stderr, "psnam: '%s' is not a region name (letters, digits, -_.)\n", name);
        return 2;
    }
    if (!server) {
        if (!strcmp(cmd, "free"))
            return shm_free(all ? NULL : name);
        return shm_show(name);
    }
    char why[512];
    if (psnam_verifier(key_file, verifier, why, sizeof(why)) != 0) {
        fprintf(stderr, "psnam: %s\n", why);
        return 1;
    }
    if (pscom_init(PSCOM_VERSION) != PSCOM_SUCCESS ||
        !(nam = psnam_connect(server, 10, why, sizeof(why)))) {
        fprintf(stderr, "psnam: %s\n", nam ? "pscom_init failed" : why);
        return 1;
    }
    int rc = nam_cmd(cmd, all ? NULL : name);
    psnam_disconnect(nam);
    pscom_cleanup();
    return rc;
}
