/*
 * gw_proto.h - the gateway protocol, spoken between the gw plugin of a rank and psgwd.
 *
 * Ranks whose networks do not meet talk through a gateway daemon (psgwd) on a node of both.
 * Each rank process keeps one pscom connection per gateway it uses (a "carrier", over shm, tcp
 * or ucp like any pscom connection); psgwd keeps one per rank process it reaches. A connection
 * between two ranks is a "tunnel" through carriers: rank A -> psgwd -> rank B. Every carrier
 * message is a pscom user message with a gw_msg_t as its user header:
 *
 *   CHALLENGE(nonce)    both ends of a fresh carrier; RESPONSE(mac) proves the job's key:
 *   RESPONSE(mac)       HMAC-SHA-256(key, "pscom-gw" role nonce), role = the responder's end
 *                       ('C' connected, 'A' accepted), so a challenge cannot be reflected.
 *                       Nothing else is taken from a carrier before its peer has answered.
 *   OPEN(gw_open_t)     A -> psgwd -> B: open a tunnel to the socket listening at target
 *   OPEN_OK             B -> psgwd -> A: src carries the sender's id of the tunnel
 *   HS(bytes)           the pscom handshake of the tunnel's connection, as a byte stream
 *   DATA(bytes)         the connection's message stream, in fragments of at most PSP_GW_MTU
 *   CREDIT              returns fragments (credits) to the sender without data
 *   CLOSE(reason)       the tunnel ends; GW_F_ERROR: because something failed
 *
 * Order: pscom completes a large message that went by rendezvous after smaller ones posted
 * behind it on the same connection, so every carrier message carries its sequence number and
 * the receiver handles them in that order.
 *
 * Ids: every message names the tunnel by the receiver's id (dst) and the sender's (src); each
 * end and psgwd choose their own. Credits: a sender holds PSP_GW_TOKENS fragments per tunnel;
 * the receiving rank returns them (in the credits field of any message back, or CREDIT) once it
 * has consumed the fragments, so psgwd never holds more than tokens x MTU per tunnel.
 */
#ifndef GW_PROTO_H_INCLUDED
#define GW_PROTO_H_INCLUDED

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pscom.h"
#include "pscom_hmac.h"

#define GW_SERVICE       "gw" /* the service psgwd's connections ask a rank's process for */
#define GW_PROTO_VERSION 1
#define GW_NONCE_LEN     16
#define GW_MAC_LEN       32
#define GW_KEY_MAX       1024
#define GW_REASON_MAX    200

enum gw_type {
    GW_CHALLENGE = 1,
    GW_RESPONSE,
    GW_OPEN,
    GW_OPEN_OK,
    GW_HS,
    GW_DATA,
    GW_CREDIT,
    GW_CLOSE,
    GW_TYPE_END
};

#define GW_F_ERROR 0x1 /* CLOSE: the tunnel failed (else an orderly end) */

typedef struct gw_msg {
    uint8_t type;
    uint8_t version;
    uint16_t flags;
    uint32_t credits; /* fragments the receiver may send again on this tunnel */
    uint64_t dst;     /* the receiver's id of the tunnel (0 in OPEN) */
    uint64_t src;     /* the sender's id */
    uint64_t seq;     /* per carrier and direction: the n-th message carries n */
} gw_msg_t;

typedef struct gw_open {
    char target[64];   /* "ip:port" of the socket the tunnel goes to */
    char origin[96];   /* who opens it, for log lines: "r0000003 on node1 pid 123" */
    char gateway[128]; /* psgwd's addresses ("ip:port,ip:port"; filled by psgwd) */
} gw_open_t;

/* The response to a challenge: HMAC-SHA-256(key, "pscom-gw" role nonce) */
static inline void gw_auth_mac(const uint8_t *key, size_t keylen, char role,
                               const uint8_t nonce[GW_NONCE_LEN], uint8_t mac[GW_MAC_LEN])
{
    uint8_t msg[8 + 1 + GW_NONCE_LEN];
    memcpy(msg, "pscom-gw", 8);
    msg[8] = (uint8_t)role;
    memcpy(msg + 9, nonce, GW_NONCE_LEN);
    pscom_hmac_sha256(key, keylen, msg, sizeof(msg), mac);
}

static inline const char *gw_type_name(unsigned type)
{
    static const char *const names[] = {"?",  "CHALLENGE", "RESPONSE", "OPEN", "OPEN_OK",
                                        "HS", "DATA",      "CREDIT",   "CLOSE"};
    return type < GW_TYPE_END ? names[type] : "?";
}

/* A carrier message's request: the user part of every request the plugin and psgwd receive
   into and send from (their buffers outlive a message: requests are reused) */
typedef struct gw_buf {
    pscom_request_t *req;  /* the request this is the user part of */
    pscom_request_t *next; /* in a pool, or among the held messages of a carrier */
    void *data;
    size_t cap;
    uint64_t tunnel; /* plugin: the tunnel a sent fragment belongs to */
    size_t direct;   /* plugin: bytes sent from or received into the user's buffer itself */
} gw_buf_t;

static inline gw_buf_t *gw_buf(pscom_request_t *req)
{
    return req->user;
}

/* A request from the pool with a buffer of at least len bytes (its user part a gw_buf_t) */
static inline pscom_request_t *gw_pool_get(pscom_request_t **pool, size_t len)
{
    pscom_request_t *req = *pool;
    if (req) {
        *pool = gw_buf(req)->next;
    } else {
        req = pscom_request_create(sizeof(gw_msg_t) + 16, sizeof(gw_buf_t));
        if (!req)
            return NULL;
        gw_buf(req)->req = req;
    }
    gw_buf_t *b = gw_buf(req);
    b->next = NULL;
    b->tunnel = 0;
    b->direct = 0;
    if (b->cap < len) {
        void *d = realloc(b->data, len);
        if (!d) {
            b->next = *pool;
            *pool = req;
            return NULL;
        }
        b->data = d;
        b->cap = len;
    }
    return req;
}

/* Back to the pool; a buffer larger than keep goes (an unusually large message) */
static inline void gw_pool_put(pscom_request_t **pool, pscom_request_t *req, size_t keep)
{
    gw_buf_t *b = gw_buf(req);
    if (b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    b->next = *pool;
    *pool = req;
}

static inline void gw_pool_free(pscom_request_t **pool)
{
    while (*pool) {
        pscom_request_t *req = *pool;
        *pool = gw_buf(req)->next;
        free(gw_buf(req)->data);
        pscom_request_free(req);
    }
}

static inline uint64_t gw_seq(pscom_request_t *req)
{
    return ((const gw_msg_t *)req->xheader)->seq;
}

/* Tunnels by id (the plugin's and psgwd's): a slot and a generation, so that the id of a tunnel
   that is gone never finds the next one in its slot */
typedef struct gw_ids {
    void **obj;
    uint64_t *id;
    uint32_t n, gen;
} gw_ids_t;

/* p's id, 0 when out of memory */
static inline uint64_t gw_ids_add(gw_ids_t *t, void *p)
{
    uint32_t i = 0;
    while (i < t->n && t->obj[i])
        i++;
    if (i == t->n) {
        uint32_t n = t->n ? 2 * t->n : 64;
        void **o = realloc(t->obj, n * sizeof(*o));
        if (!o)
            return 0;
        t->obj = o;
        uint64_t *d = realloc(t->id, n * sizeof(*d));
        if (!d)
            return 0;
        t->id = d;
        memset(t->obj + t->n, 0, (n - t->n) * sizeof(*o));
        t->n = n;
    }
    t->obj[i] = p;
    t->id[i] = ((uint64_t)++t->gen << 32) | (i + 1);
    return t->id[i];
}

static inline void *gw_ids_get(const gw_ids_t *t, uint64_t id)
{
    uint32_t i = (uint32_t)id;
    return i && i <= t->n && t->obj[i - 1] && t->id[i - 1] == id ? t->obj[i - 1] : NULL;
}

static inline void gw_ids_del(gw_ids_t *t, uint64_t id)
{
    if (gw_ids_get(t, id))
        t->obj[(uint32_t)id - 1] = NULL;
}

static inline void gw_ids_free(gw_ids_t *t)
{
    free(t->obj);
    free(t->id);
    memset(t, 0, sizeof(*t));
}

/* In-order handling of a carrier's messages (see "Order" above) */
typedef struct gw_order {
    uint64_t next_seq;     /* the message to handle next */
    pscom_request_t *held; /* those that came early, by seq */
} gw_order_t;

/* req arrived: 1 if it is the next to handle, else 0 and it is held */
static inline int gw_order_arrived(gw_order_t *o, pscom_request_t *req)
{
    if (gw_seq(req) == o->next_seq)
        return 1;
    pscom_request_t **pp = &o->held;
    while (*pp && gw_seq(*pp) < gw_seq(req))
        pp = &gw_buf(*pp)->next;
    gw_buf(req)->next = *pp;
    *pp = req;
    return 0;
}

/* one message handled: the held one that is next now, or NULL */
static inline pscom_request_t *gw_order_next(gw_order_t *o)
{
    o->next_seq++;
    pscom_request_t *req = o->held;
    if (!req || gw_seq(req) != o->next_seq)
        return NULL;
    o->held = gw_buf(req)->next;
    return req;
}

#endif
