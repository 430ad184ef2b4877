/* psnam_client.c - the client end of the psnamd protocol (psnam_client.h) */
#include "psnam_client.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "pscom.h"

#define INFLIGHT_MAX (64u << 20) /* bytes posted and not yet answered, per connection */

typedef struct pending {
    uint32_t gen; /* id = slot | gen << 32; 0: slot free */
    int waits;    /* 2: the send and the reply; done runs when both are in */
    int status;
    size_t len;
    size_t posted; /* bytes counted against INFLIGHT_MAX */
    void *result;
    size_t result_len;
    psnam_done_t done;
    void *user;
    psnam_msg_t *reply_out;
    uint64_t since_ns;
    char reason[PSNAM_REASON_MAX + 1];
} pending_t;

struct psnam_client {
    struct psnam_client *next;
    char server[128];
    int refs;
    int timeout_s;
    pscom_connection_t *con;
    int hello;  /* the greeting came */
    int broken; /* the connection failed: everything completes with PSNAM_E_LOST */
    uint8_t nonce[PSNAM_NONCE_LEN];
    pending_t *slots;
    uint32_t n_slots;
    uint32_t *free_slots;
    uint32_t n_free;
    uint32_t gen;
    unsigned n_pending;
    size_t inflight;
};

static pscom_socket_t *sock;
static psnam_client_t *clients;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void finish(psnam_client_t *c, uint32_t slot)
{
    pending_t *p = &c->slots[slot];
    psnam_done_t done = p->done;
    void *user = p->user;
    int status = p->status;
    size_t len = p->len;
    char reason[sizeof(p->reason)];
    memcpy(reason, p->reason, sizeof(reason));
    c->inflight -= p->posted;
    p->gen = 0;
    c->free_slots[c->n_free++] = slot;
    c->n_pending--;
    if (done)
        done(user, status, reason, len);
}

static void settle(psnam_client_t *c, uint32_t slot)
{
    if (--c->slots[slot].waits == 0)
        finish(c, slot);
}

/* every pending request ends with PSNAM_E_LOST and the reason */
static void fail_all(psnam_client_t *c, const char *why)
{
    if (!c->broken) {
        c->broken = 1;
        pscom_close_connection(c->con);
        c->con = NULL;
    }
    for (uint32_t i = 0; i < c->n_slots; i++) {
        pending_t *p = &c->slots[i];
        if (!p->gen)
            continue;
        p->status = PSNAM_E_LOST;
        p->len = 0;
        snprintf(p->reason, sizeof(p->reason), "psnamd %s: %s", c->server, why);
        finish(c, i);
    }
}

static pending_t *lookup(psnam_client_t *c, uint64_t id, uint32_t *slot)
{
    uint32_t s = (uint32_t)id, g = (uint32_t)(id >> 32);
    if (s >= c->n_slots || !g || c->slots[s].gen != g || c->slots[s].waits < 1)
        return NULL;
    *slot = s;
    return &c->slots[s];
}

/* ---- receiving ---- */

typedef struct rx {
    psnam_client_t *c;
    char discard[PSNAM_REASON_MAX + 1];
} rx_t;

static void on_reply(pscom_request_t *req)
{
    rx_t *x = req->user;
    psnam_client_t *c = x->c;
    const psnam_msg_t *m = req->xheader;
    uint32_t slot;
    pending_t *p;
    if (!pscom_req_successful(req) || !c) {
        pscom_request_free(req);
        return; /* the connection failed: con_error ends the requests */
    }
    if (m->type == PSNAM_HELLO) {
        if (req->data_len == PSNAM_NONCE_LEN) {
            memcpy(c->nonce, x->discard, PSNAM_NONCE_LEN);
            c->hello = 1;
        }
    } else if ((p = lookup(c, m->id, &slot))) {
        p->status = m->status;
        p->len = req->data_len;
        if (m->status != PSNAM_OK) {
            snprintf(p->reason, sizeof(p->reason), "%.*s", (int)req->data_len, x->discard);
        } else if (req->header.data_len && req->data != p->result) {
            /* more data than the caller's buffer holds (on_header did not give it that) */
            p->status = PSNAM_E_PROTO;
            p->len = 0;
            snprintf(p->reason, sizeof(p->reason), "psnamd %s: a reply of %llu bytes for %zu",
                     c->server, (unsigned long long)req->header.data_len, p->result_len);
        }
        if (p->reply_out)
            *p->reply_out = *m;
        settle(c, slot);
    }
    pscom_request_free(req);
}

static pscom_request_t *on_header(pscom_connection_t *con, pscom_header_net_t *header)
{
    psnam_client_t *c = *(psnam_client_t **)con->userdata;
    const psnam_msg_t *m = pscom_header_xheader(header);
    pscom_request_t *req = pscom_request_create(sizeof(psnam_msg_t), sizeof(rx_t));
    if (!req)
        return NULL;
    rx_t *x = req->user;
    x->c = c;
    req->connection = con;
    req->ops.io_done = on_reply;
    req->data = x->discard;
    req->data_len = sizeof(x->discard) - 1;
    uint32_t slot;
    pending_t *p;
    if (c && header->xheader_len == sizeof(*m) && m->type == PSNAM_REPLY && m->status == PSNAM_OK &&
        (p = lookup(c, m->id, &slot)) && p->result && header->data_len <= p->result_len) {
        req->data = p->result; /* straight into the caller's buffer */
        req->data_len = p->result_len;
    }
    return req;
}

static void on_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err)
{
    (void)op;
    psnam_client_t *c = *(psnam_client_t **)con->userdata;
    if (c && !c->broken) {
        c->broken = 1; /* pscom closes it */
        c->con = NULL;
        fail_all(c, pscom_err_str(err));
    }
}

/* ---- connecting ---- */

static int resolve(const char *server, char *ep, size_t len, char *why, size_t whylen)
{
    char host[128];
    const char *colon = strrchr(server, ':');
    if (!colon || colon == server || (size_t)(colon - server) >= sizeof(host) || !colon[1]) {
        snprintf(why, whylen, "'%s' is not host:port", server);
        return -1;
    }
    memcpy(host, server, (size_t)(colon - server));
    host[colon - server] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc != 0) {
        snprintf(why, whylen, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof(ip));
    freeaddrinfo(ai);
    snprintf(ep, len, "%s%s", ip, colon);
    return 0;
}

psnam_client_t *psnam_connect(const char *server, int timeout_s, char *why, size_t whylen)
{
    for (psnam_client_t *c = clients; c; c = c->next)
        if (!c->broken && strcmp(c->server, server) == 0) {
            c->refs++;
            return c;
        }
    char ep[160];
    if (resolve(server, ep, sizeof(ep), why, whylen) != 0)
        return NULL;
    if (!sock) {
        sock = pscom_open_socket(0, sizeof(psnam_client_t *));
        if (!sock) {
            snprintf(why, whylen, "pscom_open_socket failed");
            return NULL;
        }
        pscom_socket_set_name(sock, "psnam");
        sock->ops.default_recv = on_header;
        sock->ops.con_error = on_error;
    }
    psnam_client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    snprintf(c->server, sizeof(c->server), "%s", server);
    c->timeout_s = timeout_s > 0 ? timeout_s : 60;
    c->con = pscom_open_connection(sock);
    *(psnam_client_t **)c->con->userdata = c;
    pscom_err_t rc = pscom_connect(c->con, ep, PSCOM_CON_FLAG_DIRECT);
    uint64_t end = now_ns() + (uint64_t)c->timeout_s * 1000000000ull;
    while (rc == PSCOM_SUCCESS && !c->hello && !c->broken && now_ns() < end)
        pscom_progress(10);
    if (rc != PSCOM_SUCCESS || !c->hello) {
        snprintf(why, whylen, "cannot reach psnamd at %s: %s", server,
                 rc != PSCOM_SUCCESS ? pscom_err_str(rc)
                 : c->broken         ? "connection refused or closed"
                                     : "no greeting (not a psnamd?)");
        if (c->con)
            pscom_close_connection(c->con);
        free(c);
        return NULL;
    }
    c->refs = 1;
    c->next = clients;
    clients = c;
    return c;
}

void psnam_disconnect(psnam_client_t *c)
{
    if (!c || --c->refs > 0)
        return;
    while (c->n_pending && !c->broken) {
        pscom_progress(10);
        psnam_check(c);
    }
    for (psnam_client_t **p = &clients; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->con) {
        *(psnam_client_t **)c->con->userdata = NULL;
        pscom_close_connection(c->con);
    }
    free(c->slots);
    free(c->free_slots);
    free(c);
}

const uint8_t *psnam_nonce(psnam_client_t *c)
{
    return c->nonce;
}

const char *psnam_server(psnam_client_t *c)
{
    return c->server;
}

unsigned psnam_pending(psnam_client_t *c)
{
    return c->n_pending;
}

void psnam_check(psnam_client_t *c)
{
    if (!c->n_pending || c->broken)
        return;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < c->n_slots; i++)
        if (c->slots[i].gen && c->slots[i].since_ns < oldest)
            oldest = c->slots[i].since_ns;
    if (oldest != UINT64_MAX && now_ns() - oldest > (uint64_t)c->timeout_s * 1000000000ull) {
        char why[96];
        snprintf(why, sizeof(why), "no reply for %d s (PSP_NAM_TIMEOUT)", c->timeout_s);
        fail_all(c, why);
    }
}

/* ---- requests ---- */

static void on_sent(pscom_request_t *req)
{
    psnam_client_t *c = *(psnam_client_t **)req->user;
    uint64_t id = ((psnam_msg_t *)req->xheader)->id;
    uint32_t slot;
    pscom_request_free(req);
    if (c && lookup(c, id, &slot))
        settle(c, slot); /* a failed send: con_error ends the request */
}

static int grow(psnam_client_t *c)
{
    uint32_t n = c->n_slots ? 2 * c->n_slots : 64;
    pending_t *s = realloc(c->slots, n * sizeof(*s));
    if (!s)
        return -1;
    c->slots = s;
    uint32_t *f = realloc(c->free_slots, n * sizeof(*f));
    if (!f)
        return -1;
    c->free_slots = f;
    memset(s + c->n_slots, 0, (n - c->n_slots) * sizeof(*s));
    for (uint32_t i = n; i-- > c->n_slots;)
        c->free_slots[c->n_free++] = i;
    c->n_slots = n;
    return 0;
}

static int post(psnam_client_t *c, const psnam_msg_t *m, const void *data, size_t len, void *result,
                size_t result_len, psnam_done_t done, void *user, psnam_msg_t *reply_out)
{
    while (!c->broken && c->inflight > INFLIGHT_MAX) {
        pscom_progress(1);
        psnam_check(c);
    }
    pscom_request_t *req = NULL;
    if (c->broken || (!c->n_free && grow(c) != 0) ||
        !(req = pscom_request_create(sizeof(psnam_msg_t), sizeof(psnam_client_t *)))) {
        if (done)
            done(user, PSNAM_E_LOST,
                 c->broken ? "the connection to psnamd is lost" : "out of memory", 0);
        return -1;
    }
    uint32_t slot = c->free_slots[--c->n_free];
    pending_t *p = &c->slots[slot];
    if (++c->gen == 0)
        c->gen = 1;
    *p = (pending_t){.gen = c->gen,
                     .waits = 2,
                     .result = result,
                     .result_len = result_len,
                     .done = done,
                     .user = user,
                     .reply_out = reply_out,
                     /* a lock is answered when granted, which may take any time */
                     .since_ns = m->type == PSNAM_LOCK ? UINT64_MAX : now_ns(),
                     .posted = len + (m->type == PSNAM_GET ? m->len : 0)};
    c->inflight += p->posted;
    c->n_pending++;
    psnam_msg_t *x = req->xheader;
    *x = *m;
    x->version = PSNAM_PROTO_VERSION;
    x->id = (uint64_t)slot | (uint64_t)p->gen << 32;
    *(psnam_client_t **)req->user = c;
    req->xheader_len = sizeof(*x);
    req->data = (void *)data;
    req->data_len = len;
    req->connection = c->con;
    req->ops.io_done = on_sent;
    pscom_post_send(req);
    return 0;
}

int psnam_post(psnam_client_t *c, const psnam_msg_t *m, const void *data, size_t len, void *result,
               size_t result_len, psnam_done_t done, void *user)
{
    return post(c, m, data, len, result, result_len, done, user, NULL);
}

typedef struct call {
    int done, status;
    size_t len;
    char *why;
    size_t whylen;
} call_t;

static void call_done(void *user, int status, const char *reason, size_t len)
{
    call_t *k = user;
    k->done = 1;
    k->status = status;
    k->len = len;
    if (status != PSNAM_OK && k->why)
        snprintf(k->why, k->whylen, "%s", reason && *reason ? reason : psnam_err_str(status));
}

int psnam_call(psnam_client_t *c, const psnam_msg_t *m, const void *data, size_t len, void *result,
               size_t result_len, size_t *got, psnam_msg_t *reply, char *why, size_t whylen)
{
    call_t k = {.why = why, .whylen = whylen};
    post(c, m, data, len, result, result_len, call_done, &k, reply);
    while (!k.done) {
        pscom_progress(10);
        psnam_check(c);
    }
    if (got)
        *got = k.len;
    return k.status;
}

int psnam_verifier(const char *key_file, uint8_t v[PSNAM_MAC_LEN], char *why, size_t whylen)
{
    char path[4096];
    if (key_file && *key_file) {
        snprintf(path, sizeof(path), "%s", key_file);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            snprintf(why, whylen, "no PSP_NAM_KEY and no HOME for ~/.psnam.key");
            return -1;
        }
        snprintf(path, sizeof(path), "%s/.psnam.key", home);
    }
    uint8_t key[256];
    size_t len;
    char reason[256];
    /* the first use creates it; another process doing the same at once may be mid-write */
    int rc = -1;
    for (int tries = 0; rc != 0 && tries < 50; tries++) {
        rc = pscom_key_load(path, key, sizeof(key), &len, reason, sizeof(reason));
        if (rc != 0 && access(path, F_OK) != 0 &&
            pscom_key_create(path, reason, sizeof(reason)) == 0)
            continue;
        if (rc != 0 && access(path, F_OK) != 0)
            break;
        if (rc != 0)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (rc != 0) {
        snprintf(why, whylen, "psnam key %s: %s", path, reason);
        return -1;
    }
    psnam_owner_verifier(key, len, v);
    memset(key, 0, sizeof(key));
    return 0;
}
