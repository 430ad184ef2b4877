/*
 * Thin wrapper of the UCX UCP calls the ucp transport uses: one context and one worker per
 * process, active messages of one id, endpoints from worker addresses, wakeup fd. No pscom here.
 *
 * Callbacks (a message arrived, an operation completed, an endpoint failed) only ever run
 * inside ux_progress() (and the other ux_* calls that may progress); they must not call back
 * into UCX beyond ux_release().
 */
#ifndef UCP_UCX_H_INCLUDED
#define UCP_UCX_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "pscom.h" /* the tag matching types only */

typedef struct ux_ep ux_ep_t; /* a ucp_ep_h */

/* An operation in flight: done() runs once, err NULL on success, else UCX's reason. One that
   UCX never finished (its peer vanished from an endpoint without peer failure mode) gets its
   done() from ux_destroy, after UCX is gone: done() must not call UCX then. */
typedef struct ux_op ux_op_t;
struct ux_op {
    void (*done)(ux_op_t *op, const char *err);
    ux_op_t *prev, *next; /* ux's list of operations in flight */
};

/* A message arrived: hdr/hlen the sender's header, data/len the payload. rndv: data is a
   descriptor for ux_recv() (len bytes to fetch), else the payload itself. Return 1 to keep
   data (later ux_release() or ux_recv()), 0 to drop it (a dropped rndv completes the sender).
   Eager data may only be kept when keep_ok is set; else it is gone after the return. */
typedef int (*ux_recv_fn)(const void *hdr, size_t hlen, void *data, size_t len, int rndv,
                          int keep_ok);
/* The endpoint created with this user pointer failed (peer gone or unreachable). */
typedef void (*ux_ep_error_fn)(void *user, const char *why);

/* ucp_init + worker (with tag: also UCX's tag matching). 0, or -1 with the reason in why.
 *max_header: the largest hdr ux_send takes. */
int ux_init(ux_recv_fn on_recv, ux_ep_error_fn on_error, int tag, size_t *max_header, char *why,
            size_t whylen);
/* abandon: leave the worker and context to process exit instead of destroying them (UCX 1.13
   asserts in ucp_worker_destroy on wireup messages still queued to exited peers). */
void ux_destroy(int abandon);
/* This worker's address (valid until ux_destroy). */
const void *ux_address(size_t *len);
/* The wakeup fd (EPOLLIN when there is something to progress after ux_arm()). */
int ux_efd(void);
/* One ucp_worker_progress; nonzero if anything happened. A call from inside a callback (UCX
   forbids progress there) does nothing and returns 0. */
unsigned ux_progress(void);
/* Nonzero while ux_progress runs (inside a callback). */
extern int ux_progressing;
static inline int ux_in_progress(void)
{
    return ux_progressing;
}
/* Arm the wakeup fd before blocking: 0 armed, 1 events are pending (do not block). */
int ux_arm(void);

/* Endpoint to the worker at addr (trusted to be a UCP worker address). NULL: why says why.
   want_peer: ask for UCX's peer failure mode (keepalive; UCX then uses a single lane), where
   the transports allow it. *peer_mode: 1 if UCX detects the peer's failure on it (errors go to
   on_error), else 0. *shm: 1 if a lane is one of UCX's shared memory transports (or UCX did
   not say). *short_max: the longest message UCX sends by its short protocol (ux_send_now),
   SIZE_MAX if UCX did not say. */
ux_ep_t *ux_ep_create(const void *addr, void *user, int want_peer, int *peer_mode, int *shm,
                      size_t *short_max, char *why, size_t whylen);
/* Close: force drops what is in flight (its operations complete with an error). Returns NULL
   when closed at once, else a handle for ux_close_done(). */
void *ux_ep_close(ux_ep_t *ep, int force);
/* 1 when the close is complete (the handle is then released), else 0. */
int ux_close_done(void *handle);
/* Stop waiting for a close (at exit): the handle is released when it completes. */
void ux_close_forget(void *handle);

/* Send hdr+data as one active message; eager: never by UCX's rendezvous. hdr and data must stay
   valid until completion. 0: complete now (op->done is not called), 1: op->done follows,
   -1: failed (why set). */
int ux_send(ux_ep_t *ep, const void *hdr, size_t hlen, const void *data, size_t len, int eager,
            ux_op_t *op, const char **why);
/* Send hdr+data as one eager active message only if UCX can complete it at once (the buffers
   are free again on return). 0: sent, 1: not now (use ux_send), -1: failed (why set). */
int ux_send_now(ux_ep_t *ep, const void *hdr, size_t hlen, const void *data, size_t len,
                const char **why);
/* Fetch the payload of a kept rndv message into buf (len bytes). Same returns as ux_send. */
int ux_recv(void *desc, void *buf, size_t len, ux_op_t *op, const char **why);
/* Give back the payload of a kept (non-rndv) message. */
void ux_release(void *data);

/* ---- UCX's tag matching (pscom.h's pscom_tag_*; returns as those) ---- */
/* Initialised with it? */
int ux_tag_ready(void);
/* Completions of the calls below go to done once UCX returned, never inside it: at the end of
   ux_progress, or (receives, cancel) of the call itself. With PSCOM_TAG_DONE_INLINE in flags
   (done calls no pscom, hence no UCX) they go to done at once, from UCX's callbacks. */
void ux_tag_enable(pscom_tag_done_t done, unsigned flags);
int ux_tag_send(void *ep, uint64_t tag, const void *buf, size_t len, int sync, void *user);
int ux_tag_recv(uint64_t tag, uint64_t mask, void *buf, size_t len, void *user, void **op);
int ux_tag_probe(uint64_t tag, uint64_t mask, pscom_tag_info_t *info, void **msg);
int ux_tag_msg_recv(void *msg, void *buf, size_t len, void *user);
void ux_tag_cancel(void *op);

/* What the worker holds (for the SIGQUIT dump): operations in flight, tagged sends not complete. */
void ux_dump(FILE *out);
#endif
