/*
 * Internals of the ucp transport shared by its glue (ucp.c: handshake, connection life,
 * progress) and its byte stream (ucp_stream.c: sending, receiving, feeding core).
 *
 * Names: ux_ is the thin UCX wrapper (ucp_ucx.h), ucp_ what the plugin's files share (this
 * header), uc_ a file's helper for one connection (uc_t); other functions of one file have no
 * prefix (ucp.c's plugin_* and con_* fill the ops tables), so UCX's own ucp_* calls stand out.
 */
#ifndef UCP_PRIV_H_INCLUDED
#define UCP_PRIV_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "pscom_plugin.h"
#include "ucp_ucx.h"

/* PSP_UCP_* (ucp.c) */
extern struct ucp_cfg {
    size_t small;
    size_t eager;
    int direct;
    size_t cma;
    size_t queue;
    unsigned hup_ms;
    int peer_failure;
    int tag;
} ucp_cfg;

extern size_t ucp_max_header; /* largest active message header UCX takes here */

enum { K_DATA = 1, K_USER = 2 }; /* ucp_hdr_t.kind */

/* Every active message starts with ucp_hdr_t; seq counts the connection's messages (32 bits
   here, the low 16 on the wire: the receiver takes the nearest to what it expects).
   K_USER: a whole user message of core, sent by the short path, without its pscom header
   (core rebuilds it from the lengths): xlen bytes of user header, then the data, right behind
   ucp_hdr_t. A small MPI message over UCX's shared memory then fits the first cache line of
   its FIFO element: UCX's 36 bytes (element and active message header), 8 of ours, 12 of MPI
   header and 8 of data (with the pscom header and a 12-byte ucp header it took two lines, and
   MPI ping-pong of 0-8 bytes was 1.16 x MPICH's over the same UCX).
   K_DATA: any part of core's stream. ucp_data_hdr_t, in UCX's message header, then the first
   hlen bytes of the stream (the pscom header and xheader of a large message: the receiver
   matches before fetching the data); 12 bytes, so that behind UCX's 36 a pscom header lands
   8-byte aligned. */
typedef struct ucp_hdr {
    uint32_t id; /* the receiver's connection id */
    uint16_t seq;
    uint8_t kind;
    uint8_t xlen; /* K_USER */
} ucp_hdr_t;

typedef struct ucp_data_hdr {
    ucp_hdr_t h;
    uint32_t hlen;
} ucp_data_hdr_t;

/* The goodbye, on the handshake socket: the number of messages sent over UCX. It does not go
   over UCX: at close time a peer may no longer drain its receive FIFO (UCX's shared memory
   FIFO of 64 slots is shared by all its peers), and any UCX 1.13 active message that is not
   short first asks the peer for its endpoint id; both left messages queued to closing or exited
   peers, and UCX aborted at exit over them. */
#define BYE_MAGIC 0x42504355u /* "UCPB" */
typedef struct ucp_bye {
    uint32_t magic;
    uint32_t seq;
} ucp_bye_t;

enum { RX_NEW, RX_FETCHING, RX_FETCHED, RX_FAILED };

typedef struct uc uc_t;

/* A large send in flight: UCX reads the user's buffer until done; core holds the request */
typedef struct tx tx_t;
struct tx {
    ux_op_t op;
    tx_t *next; /* uc->tx_done list */
    uc_t *uc;
    pscom_req_t *req;
    const char *err;
    unsigned char hdr[]; /* ucp_data_hdr_t + pscom header and xheader */
};

typedef struct rx rx_t;
struct rx {
    ux_op_t op; /* the fetch of a rendezvous payload */
    rx_t *next;
    uc_t *uc;
    uint32_t seq, kind, xlen;
    int rndv, state;
    int copied; /* data is our copy (after the header bytes), not UCX's */
    void *data; /* the payload (eager) or UCX's descriptor (rendezvous) */
    size_t len;
    unsigned char *pre; /* hlen stream bytes from the header, fed before the payload */
    size_t pre_len;
    void *tmp; /* rendezvous payload fetched here when there is no receive buffer for it */
    const char *err;
};

struct uc {
    /* what every message looks at, in the first cache line */
    pscom_con_t *con;
    ux_ep_t *ep;
    uint32_t id, peer_id;
    uint32_t tx_seq, rx_seq;
    rx_t *rx_head; /* arrived, not fed yet, by seq */
    rx_t *rx_cur;  /* taken from rx_head: its rendezvous payload is being fetched */
    const char *ep_err;
    unsigned busy; /* nested calls that use it */
    unsigned char started, dead;
    unsigned char bye_in; /* the goodbye is in: the connection ends after message bye_seq - 1 */
    rx_t *rx_tail;
    size_t short_ok;              /* the longest message UCX took by its short protocol */
    size_t short_max;             /* the longest its short protocol takes (UCX's report) */
    uint64_t full_since;          /* ms: since when short sends find no room; 0: they did not */
    list_head_t link;             /* in the started connections, or the closing ones */
    list_head_t work_link;        /* in the work list: something to do in the next poll */
    tx_t *tx_done, *tx_done_tail; /* large sends UCX completed, to release to core */
    unsigned ops;                 /* UCX operations in flight that point into this */
    pscom_ufd_t ufd;
    int fd, ufd_on;
    uint64_t hup_at; /* ms: when the handshake socket closed; 0: open */
    int hup_drained; /* past hup_at's deadline, UCX's queues were drained once (check_hups) */
    void *close_req;
    uint64_t close_at;
    int peer_mode; /* UCX detects the peer's failure (and cancels what is in flight) */
    int eager;     /* no UCX rendezvous: shared memory lanes without peer failure detection */
    int gone;      /* closed after the peer went away */
    int cma_ok;    /* core's rendezvous with a process_vm_readv pull (eager endpoints) */
    unsigned char bye_buf[sizeof(ucp_bye_t)]; /* the peer's goodbye, as it arrives */
    unsigned bye_len;
    uint32_t bye_seq;
    int bye;        /* ended by the goodbye (not a failure) */
    size_t queued;  /* bytes of copies UCX holds for this connection (PSP_UCP_QUEUE) */
    int tx_blocked; /* ucp_write stopped at PSP_UCP_QUEUE: resumes when copies complete */
};

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

/* ucp.c */
uint64_t ucp_now_ms(void); /* CLOCK_MONOTONIC */

/* connection ids: table index in the low UCP_ID_BITS, a generation (never 0) above: a message
   for a closed connection whose slot was reused is dropped, not misdelivered */
#define UCP_ID_BITS 20
extern uc_t **ucp_ids;
extern uint32_t ucp_n_ids;

/* inline: every arriving message looks its connection up */
static inline uc_t *ucp_id_find(uint32_t id)
{
    uint32_t i = id & ((1u << UCP_ID_BITS) - 1);
    uc_t *uc = i < ucp_n_ids ? ucp_ids[i] : NULL;
    return uc && uc->id == id ? uc : NULL;
}
void ucp_work_add(uc_t *uc); /* uc has something to do in the next poll */
/* The connection failed (no-op once it is closed): core closes it. */
void ucp_fail(uc_t *uc, pscom_op_t op, pscom_err_t err, const char *why);
/* Free a dead connection once nothing refers to it any more. */
void ucp_reap(uc_t *uc);

/* ucp_tag.c: tag matching in UCX (pscom_tag_ops_t) */
extern const pscom_tag_ops_t ucp_tag_ops;

/* ucp_stream.c */
/* Set while the poller (ucp.c) progresses UCX: a message that is next in order may go to core from
   the callback (never from progress inside a handshake or close) */
extern int ucp_direct_feed;
/* UCX's active message callback (see ux_recv_fn) */
int ucp_on_recv(const void *hdr, size_t hlen, void *data, size_t len, int rndv, int keep_ok);
/* Send what core has queued, as far as it goes. */
void ucp_write(uc_t *uc);
/* A small message from the stack, sent at once or not at all (see pscom_con_ops_t). */
int ucp_write_user_now(pscom_con_t *con, const void *xheader, size_t xlen, const void *data,
                       size_t dlen);
/* Handle completions and feed what arrived in order. Nonzero if anything happened. */
int ucp_service(uc_t *uc);
/* Queue uc for service if the peer's goodbye is in and all its messages are fed. */
void ucp_bye_check(uc_t *uc);
/* Drop what arrived and was not fed, and completed sends not released (at close). */
void ucp_drop_all(uc_t *uc);
/* Free the cached copy buffers (at plugin destroy, after UCX is gone). */
void ucp_bounce_drop(void);

#endif
