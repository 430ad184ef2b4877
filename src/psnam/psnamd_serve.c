/*
 * psnamd_serve.c - what psnamd serves (psnamd_serve.h): regions, clients, their requests.
 *
 * One thread: requests are applied one at a time in arrival order (per connection in the order
 * sent), so every accumulate and atomic is atomic per element whoever sends it. PUT data is
 * received straight into the region, GET replies are sent straight from it; other requests
 * carry at most PSNAM_CHUNK_MAX bytes, which the clients respect (they pipeline large
 * transfers in chunks). With a backing directory a region is a file DIR/NAME.psnam
 * (psnam_region.h) mapped shared, so it survives a restart of psnamd; without, it lives in
 * anonymous memory. A client that goes away (closes, dies) loses its locks and its open handles.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "psnam_op.h"
#include "psnam_proto.h"
#include "psnam_region.h"
#include "psnamd_serve.h"

typedef struct client client_t;

typedef struct region {
    char name[PSNAM_NAME_MAX];
    psnam_file_t file;   /* --backing: the mapped file */
    psnam_header_t info; /* without: the header lives here */
    uint64_t *sizes;     /* nseg segment sizes */
    uint64_t *offs;      /* each segment's start in data */
    char *data;
    uint64_t total;
    uint32_t nseg;
    int clients;       /* open handles */
    int busy;          /* GET replies sent from its memory, not yet out */
    int doomed;        /* freed once busy drops to 0 */
    uint32_t *nshared; /* per segment: shared locks held */
    client_t **excl;   /* per segment: the exclusive holder */
} region_t;

typedef struct held {
    region_t *r;
    uint32_t seg; /* or PSNAM_SEG_ALL */
    int kind;
} held_t;

struct client {
    pscom_connection_t *con;
    uint8_t nonce[PSNAM_NONCE_LEN];
    region_t **handles; /* handle h is handles[h - 1] */
    uint32_t n_handles;
    held_t *held;
    uint32_t n_held;
    int dead;
    int refs; /* the connection's, and one per request of it in flight (ctx_t.c) */
};

typedef struct waiter {
    struct waiter *next;
    client_t *c;
    region_t *r;
    uint32_t seg;
    int kind;
    uint64_t id;
} waiter_t;

/* what a request or reply carries besides its pscom request */
typedef struct ctx {
    client_t *c;
    region_t *r; /* reply from region memory: busy count to drop */
    void *buf;   /* malloc'ed data */
    int scratch; /* a request whose data was not wanted (malformed, refused) */
    int refused; /* PSNAM_E_* decided when the header came */
} ctx_t;

static struct {
    uint64_t memory;
    const char *backing;
} opt;

static region_t **regions;
static uint32_t n_regions;
static uint64_t used;
static waiter_t *waiters;
static uint64_t n_requests, n_refused;
static char scratch[4096];
static FILE *log_out;
/* connections to close once pscom is out of its callbacks */
static pscom_connection_t *to_close[64];
static int n_to_close;
/* the connection psnamd_serve_poll is closing: pscom_close_connection flushes it and so runs
 * callbacks, whose close_later of that same connection would close it again once freed */
static pscom_connection_t *closing;

static void close_later(pscom_connection_t *con)
{
    if (con == closing)
        return;
    for (int i = 0; i < n_to_close; i++)
        if (to_close[i] == con)
            return;
    if (n_to_close < 64)
        to_close[n_to_close++] = con;
}

static void client_drop(pscom_connection_t *con);

void psnamd_serve_poll(void)
{
    while (n_to_close) {
        pscom_connection_t *con = to_close[--n_to_close];
        closing = con;
        client_drop(con);
        pscom_close_connection(con);
        closing = NULL;
    }
}

void psnamd_log(const char *fmt, ...)
{
    FILE *out = log_out ? log_out : stderr;
    char ts[32];
    time_t now = time(NULL);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", localtime(&now));
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "psnamd[%d] %s ", (int)getpid(), ts);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
}

void psnamd_log_to(FILE *out)
{
    log_out = out;
}

/* ---- regions ---- */

static region_t *region_find(const char *name)
{
    for (uint32_t i = 0; i < n_regions; i++)
        if (strcmp(regions[i]->name, name) == 0)
            return regions[i];
    return NULL;
}

static psnam_header_t *region_hdr(region_t *r)
{
    return r->file.hdr ? r->file.hdr : &r->info;
}

static int backing_path(char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s/%s.psnam", opt.backing, name);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

static int region_index(region_t *r, const uint64_t *sizes)
{
    r->offs = calloc(r->nseg, sizeof(uint64_t));
    r->nshared = calloc(r->nseg, sizeof(uint32_t));
    r->excl = calloc(r->nseg, sizeof(client_t *));
    region_t **nr = realloc(regions, (n_regions + 1) * sizeof(*nr));
    if (!r->offs || !r->nshared || !r->excl || !nr)
        return -1;
    regions = nr;
    uint64_t off = 0;
    for (uint32_t i = 0; i < r->nseg; i++) {
        r->offs[i] = off;
        off += sizes[i];
    }
    regions[n_regions++] = r;
    used += r->total;
    return 0;
}

static void region_release(region_t *r)
{
    free(r->offs);
    free(r->nshared);
    free(r->excl);
    if (r->file.hdr)
        psnam_file_close(&r->file);
    else {
        if (r->data && r->total)
            munmap(r->data, r->total);
        free(r->sizes);
    }
    free(r);
}

/* remove from the table now; the memory goes once no reply is sent from it */
static void region_free(region_t *r)
{
    for (uint32_t i = 0; i < n_regions; i++)
        if (regions[i] == r) {
            regions[i] = regions[--n_regions];
            break;
        }
    used -= r->total;
    char path[4200];
    if (r->file.hdr && backing_path(path, sizeof(path), r->name) == 0)
        unlink(path);
    r->doomed = 1;
    if (!r->busy)
        region_release(r);
}

static int region_create(const psnam_open_t *o, const uint64_t *sizes, region_t **out, char *why,
                         size_t whylen)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < o->nseg; i++) {
        if (sizes[i] > (1ull << 46) || total + sizes[i] < total)
            return PSNAM_E_SIZE;
        total += sizes[i];
    }
    if (total > opt.memory - used) {
        snprintf(why, whylen, "region %s needs %llu bytes, psnamd has %llu of --memory %llu left",
                 o->name, (unsigned long long)total, (unsigned long long)(opt.memory - used),
                 (unsigned long long)opt.memory);
        return PSNAM_E_NOSPACE;
    }
    region_t *r = calloc(1, sizeof(*r));
    if (!r)
        return PSNAM_E_NOSPACE;
    snprintf(r->name, sizeof(r->name), "%s", o->name);
    r->nseg = o->nseg;
    r->total = total;
    psnam_header_t h = {0};
    snprintf(h.name, sizeof(h.name), "%s", o->name);
    snprintf(h.manifestation, sizeof(h.manifestation), "nam");
    h.nseg = o->nseg;
    h.seg = -1;
    h.size = total;
    h.uid = o->uid;
    h.persistent = !!(o->flags & PSNAM_F_PERSISTENT);
    memcpy(h.verifier, o->cred, PSNAM_MAC_LEN);
    if (opt.backing) {
        char path[4200];
        if (backing_path(path, sizeof(path), o->name) != 0) {
            free(r);
            return PSNAM_E_PROTO;
        }
        int rc = psnam_file_create(path, &h, sizes, &r->file, why, whylen);
        if (rc != PSNAM_OK) {
            free(r);
            return rc;
        }
        r->file.hdr->uid = o->uid; /* the client's, not psnamd's */
        psnam_header_seal(r->file.hdr);
        r->sizes = r->file.sizes;
        r->data = r->file.data;
    } else {
        r->info = h;
        r->info.created = (int64_t)time(NULL);
        r->sizes = malloc(o->nseg * sizeof(uint64_t));
        r->data = total ? mmap(NULL, total, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                        : NULL;
        if (!r->sizes || r->data == MAP_FAILED) {
            r->data = NULL;
            region_release(r);
            return PSNAM_E_NOSPACE;
        }
        memcpy(r->sizes, sizes, o->nseg * sizeof(uint64_t));
    }
    if (region_index(r, r->sizes) != 0) {
        region_release(r);
        return PSNAM_E_NOSPACE;
    }
    *out = r;
    return PSNAM_OK;
}

/* --backing: the persistent regions of an earlier run come back; others were the job's */
static void regions_load(void)
{
    DIR *d = opendir(opt.backing);
    if (!d) {
        psnamd_log("--backing %s: %s", opt.backing, strerror(errno));
        exit(1);
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".psnam") != 0)
            continue;
        char path[4200], why[256];
        snprintf(path, sizeof(path), "%s/%s", opt.backing, e->d_name);
        region_t *r = calloc(1, sizeof(*r));
        if (!r || psnam_file_open(path, &r->file, why, sizeof(why)) != PSNAM_OK) {
            psnamd_log("skipping %s: %s", path, r ? why : "out of memory");
            free(r);
            continue;
        }
        psnam_header_t *h = r->file.hdr;
        if (!h->persistent || h->seg != -1 || !psnam_name_ok(h->name)) {
            psnamd_log("removing %s: %s", path,
                       h->persistent ? "not a psnamd region" : "not persistent");
            psnam_file_close(&r->file);
            free(r);
            unlink(path);
            continue;
        }
        snprintf(r->name, sizeof(r->name), "%s", h->name);
        r->nseg = h->nseg;
        r->total = h->size;
        r->sizes = r->file.sizes;
        r->data = r->file.data;
        if (used + r->total > opt.memory || region_index(r, r->sizes) != 0) {
            psnamd_log("%s: does not fit into --memory %llu: not served", path,
                       (unsigned long long)opt.memory);
            psnam_file_close(&r->file);
            free(r);
            continue;
        }
        psnamd_log("region %s: %u segments, %llu bytes (from %s)", r->name, r->nseg,
                   (unsigned long long)r->total, path);
    }
    closedir(d);
}

/* ---- locks ---- */

static int conflicts(region_t *r, uint32_t seg, int kind, client_t *c)
{
    uint32_t lo = seg == PSNAM_SEG_ALL ? 0 : seg, hi = seg == PSNAM_SEG_ALL ? r->nseg : seg + 1;
    for (uint32_t s = lo; s < hi; s++) {
        if (r->excl[s] && r->excl[s] != c)
            return 1;
        if (kind == PSNAM_LOCK_EXCLUSIVE && r->nshared[s])
            return 1;
    }
    return 0;
}

static int overlaps(uint32_t a, uint32_t b)
{
    return a == PSNAM_SEG_ALL || b == PSNAM_SEG_ALL || a == b;
}

/* grantable now, and no earlier waiter it would overtake unfairly (an exclusive one) */
static int grantable(waiter_t *w)
{
    if (conflicts(w->r, w->seg, w->kind, w->c))
        return 0;
    for (waiter_t *e = waiters; e && e != w; e = e->next)
        if (e->r == w->r && overlaps(e->seg, w->seg) &&
            (e->kind == PSNAM_LOCK_EXCLUSIVE || w->kind == PSNAM_LOCK_EXCLUSIVE))
            return 0;
    return 1;
}

static void lock_take(client_t *c, region_t *r, uint32_t seg, int kind)
{
    uint32_t lo = seg == PSNAM_SEG_ALL ? 0 : seg, hi = seg == PSNAM_SEG_ALL ? r->nseg : seg + 1;
    for (uint32_t s = lo; s < hi; s++) {
        if (kind == PSNAM_LOCK_EXCLUSIVE)
            r->excl[s] = c;
        else
            r->nshared[s]++;
    }
    held_t *h = realloc(c->held, (c->n_held + 1) * sizeof(*h));
    if (!h)
        abort();
    c->held = h;
    c->held[c->n_held++] = (held_t){r, seg, kind};
}

static void lock_drop(held_t *h)
{
    region_t *r = h->r;
    uint32_t lo = h->seg == PSNAM_SEG_ALL ? 0 : h->seg;
    uint32_t hi = h->seg == PSNAM_SEG_ALL ? r->nseg : h->seg + 1;
    for (uint32_t s = lo; s < hi; s++) {
        if (h->kind == PSNAM_LOCK_EXCLUSIVE)
            r->excl[s] = NULL;
        else if (r->nshared[s])
            r->nshared[s]--;
    }
}

static void reply(client_t *c, const psnam_msg_t *req, int status, void *data, size_t len,
                  region_t *from, void *owned);

static void grant_waiters(void)
{
    for (waiter_t **p = &waiters; *p;) {
        waiter_t *w = *p;
        if (!grantable(w)) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        lock_take(w->c, w->r, w->seg, w->kind);
        psnam_msg_t m = {.type = PSNAM_LOCK, .id = w->id};
        reply(w->c, &m, PSNAM_OK, NULL, 0, NULL, NULL);
        free(w);
        p = &waiters; /* a grant changes what is grantable before it */
    }
}

/* ---- replies ---- */

static void reply_done(pscom_request_t *req)
{
    ctx_t *x = req->user;
    if (x->r && --x->r->busy == 0 && x->r->doomed)
        region_release(x->r);
    free(x->buf);
    pscom_request_free(req);
}

/* data is sent from region memory (from), from a buffer the reply now owns (owned), or
   from a constant */
static void reply(client_t *c, const psnam_msg_t *q, int status, void *data, size_t len,
                  region_t *from, void *owned)
{
    if (c->dead) {
        free(owned);
        return;
    }
    pscom_request_t *req = pscom_request_create(sizeof(psnam_msg_t), sizeof(ctx_t));
    if (!req) {
        free(owned);
        return;
    }
    psnam_msg_t *m = req->xheader;
    *m = (psnam_msg_t){.type = q->type == PSNAM_HELLO ? PSNAM_HELLO : PSNAM_REPLY,
                       .version = PSNAM_PROTO_VERSION,
                       .status = status,
                       .id = q->id,
                       .region = q->region,
                       .arg = q->arg};
    ctx_t *x = req->user;
    x->buf = owned;
    x->r = from;
    if (from)
        from->busy++;
    req->xheader_len = sizeof(*m);
    req->data = data;
    req->data_len = len;
    req->connection = c->con;
    req->ops.io_done = reply_done;
    pscom_post_send(req);
}

static void reply_err(client_t *c, const psnam_msg_t *q, int status, const char *why)
{
    char *s = strdup(why && *why ? why : psnam_err_str(status));
    reply(c, q, status, s, s ? strlen(s) : 0, NULL, s);
}

/* ---- requests ---- */

static region_t *handle(client_t *c, uint32_t h)
{
    return h && h <= c->n_handles ? c->handles[h - 1] : NULL;
}

/* the segment's bytes [offset, offset + len) of request q, or NULL */
static char *target(client_t *c, const psnam_msg_t *q, uint64_t len, int *err)
{
    region_t *r = handle(c, q->region);
    if (!r) {
        *err = PSNAM_E_PROTO;
        return NULL;
    }
    if (q->seg >= r->nseg || q->offset > r->sizes[q->seg] || len > r->sizes[q->seg] - q->offset) {
        *err = PSNAM_E_RANGE;
        return NULL;
    }
    static char none; /* a region of size 0 has no data (NULL): no byte of it is touched */
    if (!r->data)
        return &none;
    return r->data + r->offs[q->seg] + q->offset;
}

static int proof_ok(client_t *c, region_t *r, const psnam_open_t *o, const char *name)
{
    uint8_t mac[PSNAM_MAC_LEN];
    psnam_proof(region_hdr(r)->verifier, c->nonce, name, mac);
    return pscom_auth_equal(mac, o->cred, sizeof(mac));
}

static void fill_info(region_t *r, psnam_info_t *i)
{
    psnam_header_t *h = region_hdr(r);
    memset(i, 0, sizeof(*i));
    snprintf(i->name, sizeof(i->name), "%s", r->name);
    i->size = r->total;
    for (uint32_t s = 0; s < r->nseg; s++)
        if (r->sizes[s] > i->seg_size)
            i->seg_size = r->sizes[s];
    i->nseg = r->nseg;
    i->uid = h->uid;
    i->created = h->created;
    i->attached = h->attached;
    i->clients = (uint32_t)r->clients;
    i->persistent = h->persistent;
}

static void do_open(client_t *c, const psnam_msg_t *q, const char *data, size_t len)
{
    psnam_open_t o;
    char why[PSNAM_REASON_MAX];
    if (len < sizeof(o))
        return reply_err(c, q, PSNAM_E_PROTO, NULL);
    memcpy(&o, data, sizeof(o));
    o.name[PSNAM_NAME_MAX - 1] = '\0';
    if (!psnam_name_ok(o.name))
        return reply_err(c, q, PSNAM_E_PROTO, "bad region name");
    region_t *r = region_find(o.name);
    psnam_msg_t a = *q;
    if (o.flags & PSNAM_F_CREATE) {
        if (r) {
            snprintf(why, sizeof(why), "region %s exists", o.name);
            return reply_err(c, q, PSNAM_E_EXIST, why);
        }
        if (!o.nseg || o.nseg > (1u << 20) || len != sizeof(o) + o.nseg * sizeof(uint64_t))
            return reply_err(c, q, PSNAM_E_PROTO, NULL);
        uint64_t *sizes = malloc(o.nseg * sizeof(uint64_t));
        if (!sizes)
            return reply_err(c, q, PSNAM_E_NOSPACE, NULL);
        memcpy(sizes, data + sizeof(o), o.nseg * sizeof(uint64_t));
        why[0] = '\0';
        int rc = region_create(&o, sizes, &r, why, sizeof(why));
        free(sizes);
        if (rc != PSNAM_OK)
            return reply_err(c, q, rc, why);
        psnamd_log("region %s created: %u segments, %llu bytes%s", r->name, r->nseg,
                   (unsigned long long)r->total, region_hdr(r)->persistent ? ", persistent" : "");
    } else {
        if (!r) {
            snprintf(why, sizeof(why), "no region %s on this psnamd", o.name);
            return reply_err(c, q, PSNAM_E_NOENT, why);
        }
        if (!proof_ok(c, r, &o, o.name)) {
            n_refused++;
            psnamd_log("region %s: refused a client without its owner's credential", r->name);
            snprintf(why, sizeof(why), "region %s: credential refused (not the owner's key)",
                     o.name);
            return reply_err(c, q, PSNAM_E_ACCESS, why);
        }
        if (o.nseg && o.nseg != r->nseg) {
            snprintf(why, sizeof(why), "region %s has %u segments, not %u", o.name, r->nseg,
                     o.nseg);
            return reply_err(c, q, PSNAM_E_SIZE, why);
        }
        region_hdr(r)->attached = (int64_t)time(NULL);
        if (r->file.hdr)
            psnam_header_seal(r->file.hdr);
    }
    region_t **nh = realloc(c->handles, (c->n_handles + 1) * sizeof(*nh));
    if (!nh)
        return reply_err(c, q, PSNAM_E_NOSPACE, NULL);
    c->handles = nh;
    c->handles[c->n_handles++] = r;
    r->clients++;
    a.region = c->n_handles;
    a.arg = r->nseg;
    reply(c, &a, PSNAM_OK, r->sizes, r->nseg * sizeof(uint64_t), r, NULL);
}

/* c's locks on r and its requests for them go with its last handle of r: a region no client
   has open holds no locks (FREE, or the last CLOSE of a region that is not persistent, may
   free it) */
static void locks_release(client_t *c, region_t *r)
{
    for (uint32_t h = 1; h <= c->n_handles; h++)
        if (c->handles[h - 1] == r)
            return;
    int dropped = 0;
    for (uint32_t i = c->n_held; i-- > 0;)
        if (c->held[i].r == r) {
            lock_drop(&c->held[i]);
            c->held[i] = c->held[--c->n_held];
            dropped = 1;
        }
    for (waiter_t **p = &waiters; *p;) {
        waiter_t *w = *p;
        if (w->c == c && w->r == r) {
            *p = w->next;
            free(w);
            dropped = 1;
        } else {
            p = &w->next;
        }
    }
    if (dropped)
        grant_waiters();
}

static void handle_close(client_t *c, uint32_t h)
{
    region_t *r = handle(c, h);
    if (!r)
        return;
    c->handles[h - 1] = NULL;
    locks_release(c, r);
    if (--r->clients == 0 && !region_hdr(r)->persistent) {
        psnamd_log("region %s freed (not persistent, last client closed it)", r->name);
        region_free(r);
    }
}

static void do_admin(client_t *c, const psnam_msg_t *q, const char *data, size_t len)
{
    psnam_open_t o;
    char why[PSNAM_REASON_MAX];
    if (len != sizeof(o))
        return reply_err(c, q, PSNAM_E_PROTO, NULL);
    memcpy(&o, data, sizeof(o));
    o.name[PSNAM_NAME_MAX - 1] = '\0';
    if (q->type == PSNAM_LIST) {
        psnam_info_t *list = calloc(n_regions ? n_regions : 1, sizeof(*list));
        uint32_t n = 0;
        for (uint32_t i = 0; list && i < n_regions; i++)
            if (proof_ok(c, regions[i], &o, ""))
                fill_info(regions[i], &list[n++]);
        return reply(c, q, PSNAM_OK, list, n * sizeof(*list), NULL, list);
    }
    region_t *r = region_find(o.name);
    if (!r) {
        snprintf(why, sizeof(why), "no region %s on this psnamd", o.name);
        return reply_err(c, q, PSNAM_E_NOENT, why);
    }
    if (!proof_ok(c, r, &o, o.name)) {
        n_refused++;
        snprintf(why, sizeof(why), "region %s: credential refused (not the owner's key)", o.name);
        return reply_err(c, q, PSNAM_E_ACCESS, why);
    }
    if (q->type == PSNAM_INFO) {
        psnam_info_t *i = malloc(sizeof(*i));
        if (i)
            fill_info(r, i);
        return reply(c, q, PSNAM_OK, i, i ? sizeof(*i) : 0, NULL, i);
    }
    if (r->clients) {
        snprintf(why, sizeof(why), "region %s is open by %d client%s", o.name, r->clients,
                 r->clients > 1 ? "s" : "");
        return reply_err(c, q, PSNAM_E_BUSY, why);
    }
    psnamd_log("region %s freed (psnam free)", r->name);
    region_free(r);
    reply(c, q, PSNAM_OK, NULL, 0, NULL, NULL);
}

static void do_lock(client_t *c, const psnam_msg_t *q)
{
    region_t *r = handle(c, q->region);
    if (!r || (q->seg >= r->nseg && q->seg != PSNAM_SEG_ALL))
        return reply_err(c, q, PSNAM_E_PROTO, NULL);
    if (q->type == PSNAM_UNLOCK) {
        for (uint32_t i = c->n_held; i-- > 0;)
            if (c->held[i].r == r && c->held[i].seg == q->seg) {
                lock_drop(&c->held[i]);
                c->held[i] = c->held[--c->n_held];
                break;
            }
        reply(c, q, PSNAM_OK, NULL, 0, NULL, NULL);
        grant_waiters();
        return;
    }
    int kind = q->arg == PSNAM_LOCK_EXCLUSIVE ? PSNAM_LOCK_EXCLUSIVE : PSNAM_LOCK_SHARED;
    waiter_t *w = calloc(1, sizeof(*w));
    if (!w)
        return reply_err(c, q, PSNAM_E_NOSPACE, NULL);
    *w = (waiter_t){.c = c, .r = r, .seg = q->seg, .kind = kind, .id = q->id};
    waiter_t **p = &waiters;
    while (*p)
        p = &(*p)->next;
    *p = w;
    grant_waiters();
}

static void client_put(client_t *c)
{
    if (c && --c->refs == 0)
        free(c);
}

/* a whole request arrived: apply it and answer */
static void on_request(pscom_request_t *req)
{
    ctx_t *x = req->user;
    client_t *c = x->c;
    const psnam_msg_t *q = req->xheader;
    if (!c || !pscom_req_successful(req) || c->dead) {
        free(x->buf);
        pscom_request_free(req);
        client_put(c);
        return;
    }
    n_requests++;
    int err = x->refused;
    if (err) {
        reply_err(c, q, err, NULL);
        goto out;
    }
    const char *d = x->buf;
    size_t len = req->data_len;
    char *t;
    switch (q->type) {
    case PSNAM_PUT: /* already in place */
        reply(c, q, PSNAM_OK, NULL, 0, NULL, NULL);
        break;
    case PSNAM_GET:
        if (q->len > PSNAM_CHUNK_MAX || !(t = target(c, q, q->len, &err)))
            reply_err(c, q, err ? err : PSNAM_E_PROTO, NULL);
        else
            reply(c, q, PSNAM_OK, t, q->len, handle(c, q->region), NULL);
        break;
    case PSNAM_ACC:
    case PSNAM_GACC: {
        size_t es = psnam_dtype_size(q->dtype);
        if (!es || len % es || !(t = target(c, q, len, &err))) {
            reply_err(c, q, err ? err : PSNAM_E_TYPE, NULL);
            break;
        }
        char *old = NULL;
        if (q->type == PSNAM_GACC && !(old = malloc(len ? len : 1))) {
            reply_err(c, q, PSNAM_E_NOSPACE, NULL);
            break;
        }
        if (old)
            memcpy(old, t, len);
        if (psnam_apply(q->op, q->dtype, t, d, len / es) != 0) {
            free(old);
            reply_err(c, q, PSNAM_E_TYPE, "operation not defined on this element type");
            break;
        }
        reply(c, q, PSNAM_OK, old, old ? len : 0, NULL, old);
        break;
    }
    case PSNAM_CAS: {
        size_t es = psnam_dtype_size(q->dtype);
        char *old = es ? malloc(es) : NULL;
        if (!es || len != 2 * es || !old || !(t = target(c, q, es, &err))) {
            free(old);
            reply_err(c, q, err ? err : PSNAM_E_TYPE, NULL);
            break;
        }
        psnam_cas(q->dtype, t, d, d + es, old);
        reply(c, q, PSNAM_OK, old, es, NULL, old);
        break;
    }
    case PSNAM_OPEN:
        do_open(c, q, d, len);
        break;
    case PSNAM_CLOSE:
        handle_close(c, q->region);
        reply(c, q, PSNAM_OK, NULL, 0, NULL, NULL);
        break;
    case PSNAM_LOCK:
    case PSNAM_UNLOCK:
        do_lock(c, q);
        break;
    case PSNAM_LIST:
    case PSNAM_INFO:
    case PSNAM_FREE:
        do_admin(c, q, d, len);
        break;
    default:
        reply_err(c, q, PSNAM_E_PROTO, NULL);
    }
out:
    free(x->buf);
    pscom_request_free(req);
    client_put(c);
}

/* The header of a message came: where its data goes (PUT: into the region itself) */
static pscom_request_t *on_header(pscom_connection_t *con, pscom_header_net_t *header)
{
    client_t *c = *(client_t **)con->userdata;
    const psnam_msg_t *q = pscom_header_xheader(header);
    pscom_request_t *req = pscom_request_create(sizeof(psnam_msg_t), sizeof(ctx_t));
    if (!req)
        return NULL;
    ctx_t *x = req->user;
    x->c = c;
    if (c)
        c->refs++;
    req->connection = con;
    req->ops.io_done = on_request;
    size_t len = header->data_len;
    int bad = !c || header->xheader_len != sizeof(psnam_msg_t) ||
              q->version != PSNAM_PROTO_VERSION || q->type <= PSNAM_HELLO ||
              q->type >= PSNAM_REPLY || len > PSNAM_CHUNK_MAX;
    if (bad) {
        psnamd_log("%s: malformed request (type %u, %zu bytes): dropping the client",
                   pscom_con_str(con), header->xheader_len >= 1 ? q->type : 0u, len);
        if (c)
            c->dead = 1;
        close_later(con);
        x->refused = PSNAM_E_PROTO;
    } else if (q->type == PSNAM_PUT) {
        int err = 0;
        char *t = target(c, q, len, &err);
        if (t) {
            req->data = t;
            req->data_len = len;
            return req;
        }
        x->refused = err;
    }
    if (x->refused) { /* swallow the data (truncated) */
        req->data = scratch;
        req->data_len = sizeof(scratch);
        return req;
    }
    x->buf = len ? malloc(len) : NULL;
    if (len && !x->buf) {
        x->refused = PSNAM_E_NOSPACE;
        req->data = scratch;
        req->data_len = sizeof(scratch);
        return req;
    }
    req->data = x->buf;
    req->data_len = len;
    return req;
}

/* ---- clients ---- */

static void on_accept(pscom_connection_t *con)
{
    client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        pscom_close_connection(con);
        return;
    }
    c->con = con;
    c->refs = 1;
    *(client_t **)con->userdata = c;
    pscom_random_bytes(c->nonce, sizeof(c->nonce));
    psnam_msg_t m = {.type = PSNAM_HELLO, .version = PSNAM_PROTO_VERSION};
    reply(c, &m, PSNAM_OK, c->nonce, sizeof(c->nonce), NULL, NULL);
}

static void client_gone(client_t *c)
{
    for (uint32_t i = 0; i < c->n_held; i++)
        lock_drop(&c->held[i]);
    if (c->n_held)
        psnamd_log("%s went away holding %u lock%s: released", pscom_con_str(c->con), c->n_held,
                   c->n_held > 1 ? "s" : "");
    c->n_held = 0;
    for (waiter_t **p = &waiters; *p;) {
        waiter_t *w = *p;
        if (w->c == c) {
            *p = w->next;
            free(w);
        } else {
            p = &w->next;
        }
    }
    for (uint32_t h = 1; h <= c->n_handles; h++)
        handle_close(c, h);
    grant_waiters();
}

static void client_drop(pscom_connection_t *con)
{
    client_t *c = *(client_t **)con->userdata;
    *(client_t **)con->userdata = NULL;
    if (!c)
        return;
    client_gone(c);
    c->dead = 1;
    free(c->handles);
    free(c->held);
    c->handles = NULL;
    c->held = NULL;
    c->n_handles = 0;
    client_put(c); /* requests of it still in flight hold it until they end */
}

static void on_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    (void)err;
    client_drop(con);
    close_later(con);
}

/* ---- the interface (psnamd_serve.h) ---- */

void psnamd_serve_init(uint64_t memory, const char *backing)
{
    opt.memory = memory;
    opt.backing = backing;
    if (backing)
        regions_load();
}

pscom_socket_t *psnamd_serve_socket(void)
{
    pscom_socket_t *s = pscom_open_socket(0, sizeof(client_t *));
    if (!s)
        return NULL;
    s->ops.con_accept = on_accept;
    s->ops.con_error = on_error;
    s->ops.default_recv = on_header;
    return s;
}

uint64_t psnamd_serve_used(void)
{
    return used;
}

void psnamd_serve_end(const char *why)
{
    uint32_t n = n_regions;
    for (uint32_t i = 0; i < n_regions; i++)
        if (regions[i]->file.hdr)
            msync(regions[i]->file.hdr, regions[i]->file.map_len, MS_SYNC);
    if (why)
        psnamd_log("%s: exiting (%llu requests applied, %llu refused; %u region%s%s)", why,
                   (unsigned long long)n_requests, (unsigned long long)n_refused, n,
                   n == 1 ? "" : "s", opt.backing ? " kept in --backing" : " dropped");
    while (n_regions) {
        region_t *r = regions[--n_regions];
        r->doomed = 1;
        if (!r->busy)
            region_release(r);
    }
    used = 0;
}
