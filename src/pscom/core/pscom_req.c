/* Request allocation. Freed requests of the same shape are kept for reuse: the netmod creates
   one per message, and malloc on that path shows in the latency. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "pscom_priv.h"

#define CACHE_MAX 256

static pscom_req_t *cache[CACHE_MAX];
static int cache_n;

static size_t user_offset(size_t max_xheader_len)
{
    return (sizeof(pscom_req_t) + max_xheader_len + 15) & ~(size_t)15;
}

#define CLEAR_FROM offsetof(pscom_req_t, magic)
_Static_assert((sizeof(pscom_req_t) - CLEAR_FROM) % 16 == 0, "clear_tail: 16-byte steps");

/* What precedes magic is written before it is read, so only the rest is cleared: 208 of 496
   bytes. In 16-byte stores: gcc makes any memset over 32 bytes a rep stos, whose start-up cost
   made clearing the whole request a sixth of a receiver's time streaming 8-byte Bcasts (2 ranks:
   0.20-0.26 -> 0.18-0.23 us per Bcast); the empty asm keeps gcc from turning the loop back into
   a memset. */
static inline void clear_tail(pscom_req_t *req)
{
    typedef char block_t __attribute__((vector_size(16), aligned(8), may_alias));
    block_t *b = (block_t *)((char *)req + CLEAR_FROM);
    for (size_t i = 0; i < (sizeof(*req) - CLEAR_FROM) / 16; i++) {
        b[i] = (block_t){0};
        __asm__("");
    }
}

static void req_init(pscom_req_t *req, size_t max_xheader_len, size_t user_size)
{
    clear_tail(req);
    list_init(&req->q);
    list_init(&req->q_any);
    list_init(&req->q_rndv);
    req->magic = REQ_MAGIC;
    req->alloc_xheader = max_xheader_len;
    req->pub.max_xheader_len = max_xheader_len;
    req->pub.xheader = pscom_header_xheader(&req->pub.header);
    req->pub.user_size = user_size;
    req->pub.user = user_size ? (char *)req + user_offset(max_xheader_len) : NULL;
}

pscom_req_t *pscom_req_alloc(size_t max_xheader_len, size_t user_size)
{
    for (int i = cache_n - 1; i >= 0 && i >= cache_n - 8; i--) {
        pscom_req_t *req = cache[i];
        if (req->alloc_xheader == max_xheader_len && req->pub.user_size == user_size) {
            cache[i] = cache[--cache_n];
            req_init(req, max_xheader_len, user_size);
            return req;
        }
    }
    pscom_req_t *req = malloc(user_offset(max_xheader_len) + user_size);
    if (!req)
        return NULL;
    req_init(req, max_xheader_len, user_size);
    return req;
}

void pscom_req_release(pscom_req_t *req)
{
    req->magic = 0;
    if (cache_n < CACHE_MAX) {
        cache[cache_n++] = req;
        return;
    }
    free(req);
}

PSCOM_API pscom_request_t *pscom_request_create(size_t max_xheader_len, size_t user_size)
{
    if (max_xheader_len > PSCOM_XHEADER_MAX)
        return NULL;
    pscom_lock();
    pscom_req_t *req = pscom_req_alloc(max_xheader_len, user_size);
    pscom_unlock();
    if (!req)
        return NULL;
    /* the API promises a zeroed user area; core's own requests (control messages, unexpected
       data kept inline) fill theirs at once and skip this */
    if (user_size)
        memset(req->pub.user, 0, user_size);
    return &req->pub;
}

PSCOM_API void pscom_request_free(pscom_request_t *pub)
{
    if (!pub)
        return;
    pscom_req_t *req = get_req(pub);
    if (req->magic != REQ_MAGIC)
        pscom_fatal("pscom_request_free: not a request or freed twice (%p)", (void *)pub);
    if ((pub->state & PSCOM_REQ_STATE_POSTED) && !(pub->state & PSCOM_REQ_STATE_DONE))
        pscom_fatal("pscom_request_free: request %p is still pending (%s)", (void *)pub,
                    pscom_req_state_str(pub->state));
    pscom_lock();
    pscom_req_release(req);
    pscom_unlock();
}

PSCOM_API const char *pscom_req_state_str(unsigned int state)
{
    static __thread char buf[160];
    static const char *names[] = {"send",       "recv",    "grecv",      "posted",
                                  "io_started", "io_done", "error",      "canceled",
                                  "truncated",  "done",    "rendezvous", "merged"};
    buf[0] = '\0';
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (state & (1u << i)) {
            if (buf[0])
                strcat(buf, "|");
            strcat(buf, names[i]);
        }
    return buf;
}
