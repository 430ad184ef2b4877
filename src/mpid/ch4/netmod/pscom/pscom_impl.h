/*
 * Internal definitions of the ch4:pscom netmod: global state, wire headers, and the user area
 * of every pscom request the netmod creates.
 */
#ifndef PSCOM_IMPL_H_INCLUDED
#define PSCOM_IMPL_H_INCLUDED

#include <mpidimpl.h>
#include "mpidch4r.h"
#include "ch4_impl.h"
#include <pscom.h>
#include <sched.h>

#define MPIDI_PSCOM_AV(av)   ((av)->netmod.pscom)
#define MPIDI_PSCOM_REQ(req) ((req)->dev.ch4.netmod.pscom)

/* ---- wire format: the xheader of every message starts with a type byte ---- */

#define MPIDI_PSCOM_WIRE_VERSION 2

enum MPIDI_PSCOM_msg_type {
    MPIDI_PSCOM_MSG_AM = 1,          /* MPIDIG active message */
    MPIDI_PSCOM_MSG_TAGGED = 2,      /* native MPI point-to-point */
    MPIDI_PSCOM_MSG_SSEND_ACK = 3,   /* receiver matched a synchronous send */
    MPIDI_PSCOM_MSG_DYNAMIC = 4,     /* dynamic_send/dynamic_recv (connect/accept, spawn) */
    MPIDI_PSCOM_MSG_TAGGED_SYNC = 5, /* synchronous send: the receiver acks the match */
    MPIDI_PSCOM_MSG_TAGGED_PIPE = 6, /* first chunk of a chunked send (pscom_pipe.c) */
    MPIDI_PSCOM_MSG_PIPE_CHUNK = 7,  /* a further chunk of it */
};

#define MPIDI_PSCOM_AM_FLAG_HDR_IN_DATA 0x1 /* am_hdr too big for the xheader: leads the data */

typedef struct {
    uint8_t type; /* MPIDI_PSCOM_MSG_AM */
    uint8_t version;
    uint8_t flags;
    uint8_t handler_id;
    uint32_t am_hdr_sz;
    /* am_hdr follows (8-byte aligned) unless HDR_IN_DATA */
} MPIDI_PSCOM_am_xhdr_t;

/* 12 bytes travel with a plain message, all of the struct with a synchronous one: a small
   MPI message then fits the first cache line of a transport's slot or FIFO element (UCX's
   shared memory: 36 bytes of its own headers, 8 of the ucp plugin's, 12 + 8 bytes of data). */
typedef struct {
    uint8_t type; /* MPIDI_PSCOM_MSG_TAGGED, or MPIDI_PSCOM_MSG_TAGGED_SYNC (sreq follows) */
    uint8_t version;
    uint16_t context_id; /* sender's context_id + context_offset */
    int32_t tag;         /* MPI tag including MPIR error bits */
    int32_t src_rank;    /* sender's rank in the communicator */
    uint32_t unused;     /* TAGGED_SYNC only from here; TAGGED_PIPE: the pipeline's id */
    uint64_t sreq;       /* sender's request, echoed in the ack; TAGGED_PIPE: the message's bytes */
} MPIDI_PSCOM_tagged_xhdr_t;

/* A further chunk of a chunked send: matched by the receive its first chunk started */
typedef struct {
    uint8_t type; /* MPIDI_PSCOM_MSG_PIPE_CHUNK */
    uint8_t version;
    uint8_t unused[2];
    uint32_t pipe;   /* as the TAGGED_PIPE message's */
    uint64_t offset; /* where its bytes go in the message */
} MPIDI_PSCOM_chunk_xhdr_t;

#define MPIDI_PSCOM_TAGGED_XHDR_LEN offsetof(MPIDI_PSCOM_tagged_xhdr_t, unused) /* plain */
_Static_assert(sizeof(MPIR_Context_id_t) == 2, "context ids travel in 16 bits");

/* Sends of at most this many bytes first try pscom_send_now (a default shm ring record holds
   8 KiB with the headers; the transport decides, this only spares larger ones the try) */
#define MPIDI_PSCOM_SEND_NOW_MAX 8192

typedef struct {
    uint8_t type; /* MPIDI_PSCOM_MSG_SSEND_ACK */
    uint8_t version;
    uint8_t unused[6];
    uint64_t sreq;
} MPIDI_PSCOM_ack_xhdr_t;

typedef struct {
    uint8_t type; /* MPIDI_PSCOM_MSG_DYNAMIC */
    uint8_t version;
    uint8_t unused[2];
    int32_t tag;
} MPIDI_PSCOM_dyn_xhdr_t;

/* Largest am_hdr carried in the xheader; bigger ones travel in front of the data. */
#define MPIDI_PSCOM_AM_XHDR_MAX (PSCOM_XHEADER_MAX - (int)sizeof(MPIDI_PSCOM_am_xhdr_t))
/* Eager AM limit: MPIDIG copies unexpected eager AMs into cells of
 * MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (64 KiB by default); above this it uses RTS/CTS. */
#define MPIDI_PSCOM_AM_EAGER_MAX (16 * 1024)

/* MPIDI_PSCOM_request_t.mrecv_state bits */
#define MPIDI_PSCOM_MRECV_DATA_DONE 0x1 /* the probed message is in the staging buffer */
#define MPIDI_PSCOM_MRECV_POSTED    0x2 /* MPI_Imrecv named the user buffer */

/* ---- the user area of every pscom request we create ---- */

typedef struct MPIDI_PSCOM_preq {
    pscom_request_t *next;                   /* link in the completion queue */
    void (*complete)(pscom_request_t *preq); /* finishes it in MPIDI_NM_progress, outside pscom */
    MPIR_Request *req;                       /* the MPICH request, if any */
    void *buf;                               /* buffer owned by this pscom request */
    /* tagged receive: what recv_accept matches */
    uint32_t context_id;
    int32_t src_rank; /* MPI_ANY_SOURCE allowed */
    int32_t tag;      /* MPI_ANY_TAG allowed */
    int handler_id;   /* AM origin: MPIDIG origin callback to run */
    void *pipe;       /* a chunked send or receive this request carries a chunk of */
    size_t pipe_off;  /* that chunk's place in its message */
} MPIDI_PSCOM_preq_t;

#define MPIDI_PSCOM_PREQ(preq) ((MPIDI_PSCOM_preq_t *)(preq)->user)

/* ---- global state ---- */

/* One window of MPI_Irecv/MPI_Isend in flight (mpi_pp's is 64) both ways, with room to spare */
#define MPIDI_PSCOM_PREQ_CACHE_MAX 256

typedef struct {
    pscom_socket_t *socket;
    char ep_str[PSCOM_EP_STR_MAX];
    /* io_done only queues; MPIDI_NM_progress completes outside pscom (no re-entry, FIFO) */
    pscom_request_t *done_head;
    pscom_request_t *done_tail;
    int in_drain;
    int finalizing;
    int world_done;       /* init_world ran: av table 0 holds our entries (sessions may skip it) */
    int yield_idle;       /* sched_yield() after a progress poll that found nothing */
    int coll_block_polls; /* idle polls in a Bcast's wait before it sleeps; -1 never */
    int coll_block_polls_shm; /* the same on a communicator within one node's shm */
    size_t bcast_tree_max;    /* PSP_MPI_BCAST_TREE_MAX (pscom_coll.h) */
    int coll_shm;             /* PSP_MPI_COLL_SHM (pscom_coll_shm.c) */
    int shm_on;               /* PSP_SHM is not 0: ranks on one node talk through shared memory */
    int nap_polls;            /* idle polls in a row after which one naps instead; -1 never */
    uint64_t nap_after_ns;    /* idle this long on a crowded node, nap instead; 0 never */
    int napping;              /* nap_polls or nap_after_ns reached: every idle poll naps */
    unsigned idle_polls;      /* progress polls in a row that found nothing */
    uint64_t late_yield_ns;   /* idle this long, yield although the node seems not crowded */
    uint64_t idle_since_ns;   /* the clock at the MPIDI_PSCOM_IDLE_POLLS-th idle poll in a row */
    int late_yielding;        /* idle for late_yield_ns: every idle poll yields */
    /* connections the peer closed, to be closed on our side too (MPIDI_PSCOM_reap_closed) */
    pscom_connection_t **closed;
    int n_closed;
    int max_closed;
    /* a connection broke (or never came up): when to end the job if it still runs then, and
       what to say (MPIDI_PSCOM_check_lost); 0: nothing lost */
    uint64_t lost_deadline_ns;
    char lost_msg[256];
    /* requests failed by a broken connection, completed (with their error) only at
       held_until_ns (MPIDI_PSCOM_complete_broken) */
    MPIR_Request **held;
    int n_held;
    int max_held;
    uint64_t held_until_ns;
    /* finished requests of the tagged shape, reused by MPIDI_PSCOM_preq_create (pscom_queue.c) */
    pscom_request_t *preq_cache[MPIDI_PSCOM_PREQ_CACHE_MAX];
    int n_preq_cache;
    /* MPI point-to-point matched by the transport (pscom_tagmatch.h) */
    int tag_mode;
    /* CUDA device memory may come (PSP_CUDA=1, pscom_gpu.h): a copy of libpscom's flag next to
       tag_mode, which the same calls read (the rate of small messages showed a load of
       libpscom's own variable on the message path) */
    int cuda;
    MPIR_Request *spare_sreq; /* the send request of the next send that does not complete at once */
} MPIDI_PSCOM_global_t;

extern MPIDI_PSCOM_global_t MPIDI_PSCOM_global;

/* pscom_queue.c */
pscom_request_t *MPIDI_PSCOM_preq_create(size_t max_xheader_len,
                                         void (*complete)(pscom_request_t *preq));
void MPIDI_PSCOM_preq_free(pscom_request_t *preq);
void MPIDI_PSCOM_preq_cache_drop(void);
void MPIDI_PSCOM_io_done(pscom_request_t *preq);
int MPIDI_PSCOM_drain(void);

/* A request that pscom completed inside its post call (an eager send it could write at once,
   a receive of a message that was already there) and that is alone in the completion queue:
   finish it now, so that MPI_Send/MPI_Recv need no progress round for it. Queue order still
   holds, nothing was queued before it. */
MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_finish_posted(pscom_request_t *preq)
{
    MPIDI_PSCOM_global_t *g = &MPIDI_PSCOM_global;
    if (g->done_head == preq && g->done_tail == preq && !g->in_drain) {
        g->done_head = g->done_tail = NULL;
        MPIDI_PSCOM_PREQ(preq)->complete(preq);
    }
}

/* pscom_am.c */
pscom_request_t *MPIDI_PSCOM_default_recv(pscom_connection_t *con, pscom_header_net_t *header);
void MPIDI_PSCOM_am_send_done(pscom_request_t *preq);

/* pscom_tagged.c */
int MPIDI_PSCOM_tagged_accept(pscom_request_t *preq, pscom_connection_t *con,
                              pscom_header_net_t *header);
void MPIDI_PSCOM_tagged_send_done(pscom_request_t *preq);
void MPIDI_PSCOM_tagged_recv_done(pscom_request_t *preq);
void MPIDI_PSCOM_tagged_recv_io_done(pscom_request_t *preq);
void MPIDI_PSCOM_mrecv_done(pscom_request_t *preq);
void MPIDI_PSCOM_mrecv_post(MPIR_Request *rreq, void *buf, MPI_Aint count, MPI_Datatype datatype);
pscom_request_t *MPIDI_PSCOM_ack_recv(pscom_header_net_t *header);
void MPIDI_PSCOM_fill_status(MPI_Status *status, pscom_request_t *preq);

/* A probed tagged message's bytes: all its chunks for a chunked one (pscom_pipe.c) */
MPL_STATIC_INLINE_PREFIX size_t MPIDI_PSCOM_msg_len(const pscom_request_t *preq)
{
    const MPIDI_PSCOM_tagged_xhdr_t *xh = preq->xheader;
    return preq->xheader_len >= sizeof(*xh) && xh->type == MPIDI_PSCOM_MSG_TAGGED_PIPE
               ? (size_t)xh->sreq
               : (size_t)preq->header.data_len;
}

/* pscom_pipe.c: chunked sends of device memory; a receive that matched a first chunk */
extern size_t MPIDI_PSCOM_pipe_min, MPIDI_PSCOM_pipe_chunk;
int MPIDI_PSCOM_pipe_isend(const void *dev, size_t len, MPIDI_PSCOM_tagged_xhdr_t xh,
                           pscom_connection_t *con, MPIR_Request **request);
int MPIDI_PSCOM_pipe_recv(pscom_request_t *preq0, size_t cap, void *dev,
                          void (*finish)(pscom_request_t *preq0));

void MPIDI_PSCOM_tm_done(void *user, pscom_tag_status_t status, const pscom_tag_info_t *info);
void MPIDI_PSCOM_tm_init(void);
void MPIDI_PSCOM_tm_finalize(void);

/* pscom_con.c */
void MPIDI_PSCOM_con_error(pscom_connection_t *con, pscom_op_t op, pscom_err_t err);
int MPIDI_PSCOM_connect_av(MPIDI_av_entry_t *av, const char *ep);
pscom_connection_t *MPIDI_PSCOM_av_reconnect(MPIDI_av_entry_t *av);
void MPIDI_PSCOM_reap_closed(void);
void MPIDI_PSCOM_check_lost(
    void); /* a broken connection: abort once PSP_MPI_LOST_PEER_ABORT passed */
extern unsigned MPIDI_PSCOM_lost_peer_abort_s;
void MPIDI_PSCOM_complete_broken(MPIR_Request *req);
void MPIDI_PSCOM_release_held(void);
void MPIDI_PSCOM_nap(void); /* PSP_MPI_NAP: an idle rank of a crowded node sleeps a little */
/* every this many idle polls in a row MPIDI_PSCOM_idle_long / _idle_crowded look at the clock
   (PSP_MPI_YIELD_AFTER_US, PSP_MPI_NAP_AFTER_US) */
#define MPIDI_PSCOM_IDLE_POLLS 16
void MPIDI_PSCOM_idle_long(void);
void MPIDI_PSCOM_idle_crowded(void);

/* Something completed that pscom did not see (a Barrier through shared memory): the rank is
   not idle, whatever the polls before found */
MPL_STATIC_INLINE_PREFIX void MPIDI_PSCOM_not_idle(void)
{
    MPIDI_PSCOM_global.idle_polls = 0;
    MPIDI_PSCOM_global.late_yielding = 0;
    MPIDI_PSCOM_global.napping = 0;
}

MPL_STATIC_INLINE_PREFIX uint64_t MPIDI_PSCOM_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The connection to the process of av entry; made again if the peer had closed the old one. */
MPL_STATIC_INLINE_PREFIX pscom_connection_t *MPIDI_PSCOM_av_con(MPIDI_av_entry_t *av)
{
    pscom_connection_t *con = MPIDI_PSCOM_AV(av).con;
    return likely(con != NULL) ? con : MPIDI_PSCOM_av_reconnect(av);
}

/* The connection to rank of comm (MPI_PROC_NULL never gets here). */
MPL_STATIC_INLINE_PREFIX pscom_connection_t *MPIDI_PSCOM_comm_con(MPIR_Comm *comm, int rank)
{
    return MPIDI_PSCOM_av_con(MPIDIU_comm_rank_to_av(comm, rank));
}

/* The xheader of a plain (not synchronous) tagged message of comm's rank. */
MPL_STATIC_INLINE_PREFIX MPIDI_PSCOM_tagged_xhdr_t MPIDI_PSCOM_tagged_xhdr(MPIR_Comm *comm,
                                                                           int context_offset,
                                                                           int tag)
{
    return (MPIDI_PSCOM_tagged_xhdr_t){.type = MPIDI_PSCOM_MSG_TAGGED,
                                       .version = MPIDI_PSCOM_WIRE_VERSION,
                                       .tag = tag,
                                       .context_id = comm->context_id + context_offset,
                                       .src_rank = comm->rank};
}

/* The request a matched probe hands out (MPI_Message) until MPI_Imrecv takes it: preq, the
   staged receive of pscom's matching, or tag_op, the message UCX's took out of its matching. */
MPL_STATIC_INLINE_PREFIX MPIR_Request *MPIDI_PSCOM_mprobe_request(pscom_request_t *preq,
                                                                  void *tag_op)
{
    MPIR_Request *req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__MPROBE, 0, 2);
    if (req) {
        MPIDI_PSCOM_request_t *r = &MPIDI_PSCOM_REQ(req);
        r->preq = preq;
        r->pack_buf = NULL;
        r->user_buf = NULL;
        r->datatype = MPI_DATATYPE_NULL;
        r->mrecv_state = 0;
        r->tag_op = tag_op;
    }
    return req;
}

#include "pscom_msa.h"

#endif /* PSCOM_IMPL_H_INCLUDED */
