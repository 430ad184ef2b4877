/* pscom_priv.h - core-private objects. Plugins do not include this file. */
#ifndef PSCOM_PRIV_H_INCLUDED
#define PSCOM_PRIV_H_INCLUDED

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include "pscom.h"
#include "pscom_list.h"
#include "pscom_plugin.h"

#define PSCOM_API __attribute__((visibility("default")))

/* ---- wire format ---- */

#define PSCOM_WIRE_VERSION 0x54 /* in every message header and in the handshake */

enum pscom_msgtype {
    MSGTYPE_USER = PSCOM_MSGTYPE_USER,
    MSGTYPE_RNDV_REQ = 1,  /* xheader: rndv_req_t [rndv_gpu_t], the user's header_net + xheader */
    MSGTYPE_RNDV_FIN = 2,  /* xheader: rndv_fin_t; receiver pulled the data, sender is done */
    MSGTYPE_RNDV_READ = 3, /* xheader: rndv_read_t; receiver asks the sender to push */
    MSGTYPE_RNDV_DATA = 4, /* xheader: rndv_fin_t (recv id); the pushed data */
    MSGTYPE_EOF = 5,       /* orderly close */
    MSGTYPE_PAD = 6,       /* data: filler that puts the next message's data in place */
    MSGTYPE_CREDIT = 7,    /* xheader: fc_credit_t; the receiver takes more eager bytes */
    MSGTYPE_COUNT
};

typedef struct rndv_req {
    uint64_t send_id;
    uint64_t addr; /* sender's buffer, for a single-copy pull */
    uint64_t len;
    uint64_t flags; /* RNDV_FLAG_*; no other bit is valid */
} rndv_req_t;

#define RNDV_FLAG_GPU 0x1 /* the buffer is device memory; a rndv_gpu_t follows */

/* Device memory of the sender, for a receiver on its node (pscom_cuda.c) */
typedef struct rndv_gpu {
    uint8_t ipc[PSCOM_GPU_IPC_HANDLE_SIZE]; /* the allocation that holds it */
    uint64_t offset;                        /* of the buffer in it */
} rndv_gpu_t;

typedef struct rndv_fin {
    uint64_t id;
} rndv_fin_t;

typedef struct rndv_read {
    uint64_t send_id;
    uint64_t recv_id;
} rndv_read_t;

typedef struct fc_credit {
    uint64_t bytes;
} fc_credit_t;

/* Flow control (pscom_fc.c): what an eager user message costs its receiver while it waits
   unexpected: its data and xheader, and what a generated request takes besides (384 bytes
   on x86-64, a small message's inline data class, malloc's header). Sender and receiver
   count the same. */
#define FC_MSG_COST 512
/* Every connection's credit before its receiver's first grant: a few messages. Not taken from
   PSP_UNEXPECTED_MAX: the bound is the limit plus this per connection. */
#define FC_INITIAL (16 * 1024)
static inline uint64_t pscom_fc_cost(size_t xheader_len, uint64_t data_len)
{
    return data_len + xheader_len + FC_MSG_COST;
}

#define HDR_SIZE sizeof(pscom_header_net_t)

/* A message header: in place, or written to dst at any alignment (the prefix buffer) */
static inline void pscom_set_header(pscom_header_net_t *h, uint8_t type, size_t xlen, uint64_t dlen)
{
    h->data_len = dlen;
    h->xheader_len = (uint16_t)xlen;
    h->msg_type = type;
    h->version = PSCOM_WIRE_VERSION;
    h->reserved = 0;
}

static inline void pscom_put_header(void *dst, uint8_t type, size_t xlen, uint64_t dlen)
{
    pscom_header_net_t h;
    pscom_set_header(&h, type, xlen, dlen);
    memcpy(dst, &h, sizeof(h));
}
#define RNDV_PREFIX_SIZE (sizeof(rndv_req_t) + HDR_SIZE)
/* Largest xheader on the wire: a device rendezvous request around the largest user xheader. */
#define WIRE_XHEADER_MAX (RNDV_PREFIX_SIZE + sizeof(rndv_gpu_t) + PSCOM_XHEADER_MAX)
/* Filler bytes of a PAD message: below one alignment unit (pscom_con_set_data_align) */
#define PAD_MAX 63
/* What a send writes before its header and xheader: a (device) rendezvous request, or a PAD
   message and the RNDV_DATA header behind it */
#define PREFIX_MAX (HDR_SIZE + sizeof(rndv_req_t) + sizeof(rndv_gpu_t))
_Static_assert(PREFIX_MAX >= 2 * HDR_SIZE + PAD_MAX + sizeof(rndv_fin_t), "a pushed PAD fits");

/* ---- requests ---- */

#define REQ_MAGIC 0x72657131u

/* pscom_req_t.flags */
#define RQ_INTERNAL   0x1    /* pscom's own message: freed after completion */
#define RQ_IOV_READY  0x10   /* send: iov prepared (eager/rendezvous decided) */
#define RQ_RNDV_WAIT  0x20   /* send: rendezvous request; completes on FIN or after the push */
#define RQ_PUSH       0x40   /* send: pushing rendezvous data; completes when written */
#define RQ_GEN_INLINE 0x80   /* generated: the data lives in the request, not in a malloc */
#define RQ_FC_RNDV    0x100  /* send: rendezvous for want of credit; seq: since when (ms) */
#define RQ_GPU        0x200  /* send: the data is device memory (pscom_post_send_gpu) */
#define RQ_RNDV_GPU   0x400  /* recv: the rendezvous offers device memory (rndv_gpu) */
#define RQ_GPU_HOST   0x800  /* send: goes from gpu_host, a host copy, freed on completion */
#define RQ_GPU_DST    0x1000 /* recv: pscom_post_recv_gpu's device buffer is in gpu_dst */
#define RQ_FC_PARKED  0x2000 /* generated: a rendezvous for want of credit, in con->fc_parked */
#define RQ_FC_AHEAD   0x4000 /* generated: data fetched ahead, in con->rndv_recvs until it came */

typedef struct pscom_req pscom_req_t;
typedef struct pscom_con pscom_con_t;
typedef struct pscom_sock pscom_sock_t;

struct pscom_req {
    /* Written before they are read (by the send paths, with RQ_IOV_READY / RQ_RNDV_GPU), so a
       reused request keeps them as they were (req_init clears only what follows them). */
    struct iovec iov[3];
    unsigned char prefix[PREFIX_MAX]; /* outer header of internal messages, or a PAD message */
    rndv_gpu_t rndv_gpu;              /* recv: with RQ_RNDV_GPU; send: with RQ_GPU */
    list_head_t q;                    /* sendq / recvq / genq of the connection / recvq_any */
    list_head_t q_any;                /* generated requests: sock->genq_any */
    list_head_t q_rndv;               /* con->rndv_sends / con->rndv_recvs / con->fc_parked */
    /* cleared from here on */
    uint32_t magic;
    uint32_t flags;
    uint64_t seq; /* post order of receives; decides between a con and an ANY receive */
    uint64_t id;  /* rendezvous id */
    /* receive */
    uint64_t rndv_addr, rndv_len, rndv_send_id; /* from a RNDV_REQ not yet pulled */
    void *gpu_dst;                              /* with RQ_GPU_DST */
    void *gpu_host;                             /* with RQ_GPU_HOST */
    size_t gpu_host_cap;
    pscom_req_t *partner; /* generated request <-> the receive it feeds */
    uint64_t fc_cost;     /* generated eager message: its cost, until a receive takes it */
    size_t alloc_xheader;
    pscom_request_t pub; /* last: the xheader storage follows */
};

static inline pscom_req_t *get_req(pscom_request_t *pub)
{
    return list_entry(pub, pscom_req_t, pub);
}

/* What a send puts on the wire: its data, or the host copy of its device memory */
static inline void *pscom_req_send_data(const pscom_req_t *req)
{
    return unlikely(req->flags & RQ_GPU_HOST) ? req->gpu_host : req->pub.data;
}

/* ---- connections ---- */

#define CON_MAGIC 0x636f6e31u

typedef struct precon precon_t;

typedef struct recv_state {
    unsigned char *hbuf; /* assembles a header split across feeds (allocated on demand) */
    size_t hlen;         /* bytes in hbuf */
    pscom_req_t *req;    /* request receiving the current message's data, or NULL (discard) */
    uint64_t data_left;  /* data bytes of the current message still to come */
    char *dst;           /* where they go */
    uint64_t dst_left;   /* room at dst; the rest is discarded (truncation) */
} recv_state_t;

struct pscom_con {
    pscom_connection_t pub;
    pscom_sock_t *sock;
    list_head_t next;      /* in sock->cons */
    list_head_t kick_link; /* in pscom_io.c's kick_later while queued there */
    uint32_t magic;
    unsigned int eof_received : 1, eof_sent : 1, error_reported : 1, closed : 1, user_closed : 1,
        accepted_new : 1;
    uint64_t connect_start_ms; /* ACCEPTING after losing a tie-break: since when */
    int connect_deferred;      /* CONNECTING, waits for the peer's own attempt (pscom_con.c) */
    pscom_err_t last_err;      /* why the connection failed (pscom_connect's result) */

    const pscom_plugin_t *plugin;
    const pscom_con_ops_t *ops;
    void *tdata;
    size_t rndv_threshold;
    /* flow control (pscom_fc.c) */
    int64_t fc_credit;     /* send: eager bytes the peer takes before its next grant */
    int fc_granted;        /* send: the peer's first grant came (until then sends wait for it) */
    uint64_t fc_window;    /* receive: all we granted the peer (FC_INITIAL + fc_reserved) */
    uint64_t fc_reserved;  /* of that, taken from pscom_global.fc_pool */
    uint64_t fc_return;    /* receive: bytes of messages taken since our last grant, and
                              what the window grew by (fc_grown) */
    uint64_t fc_grown;     /* receive: what the window grew by since our last grant */
    uint64_t fc_late;      /* receive: of the bytes taken since our last grant, those of
                              messages that had waited unexpected */
    uint64_t fc_taken_old; /* receive: bytes taken before our last grant, halved at each */
    uint64_t fc_late_old;  /* receive: fc_late likewise */
    list_head_t fc_link;   /* in pscom_fc.c's connections with a grant due */
    uint32_t data_align;   /* pscom_con_set_data_align: 0 none */
    size_t data_align_min; /* data of at least this size only */

    /* peer identity */
    char peer_ep[PSCOM_EP_STR_MAX];
    char peer_addr[PSCOM_EP_STR_MAX]; /* "ip:port" of the peer's listener, for the tie-break */
    char peer_name[PSCOM_NAME_MAX];
    char peer_host[64];
    int peer_pid;
    uint64_t peer_node;
    uint8_t peer_key[16]; /* the key in the peer's endpoint string (zeros: none there) */
    char log_name[PSCOM_NAME_MAX + PSCOM_EP_STR_MAX + 16];

    list_head_t sendq;
    list_head_t held_sends; /* written, the transport still reads the buffer */
    list_head_t recvq;
    list_head_t genq;
    list_head_t rndv_sends;
    list_head_t rndv_recvs;
    list_head_t fc_parked; /* generated rendezvous requests for want of credit (pscom_fc.c) */
    uint64_t next_rndv_id;
    recv_state_t rs;

    precon_t *precon;                           /* our outgoing handshake, while connecting */
    char via[80];                               /* pscom_con_set_via: the route, for log lines */
    void *tag_ep;                               /* pscom_con_set_tag_ep */
    struct tag_wait *tag_wait, **tag_wait_tail; /* tagged sends waiting for the connection */
};

static inline pscom_con_t *get_con(pscom_connection_t *pub)
{
    return list_entry(pub, pscom_con_t, pub);
}

/* ---- sockets ---- */

#define SOCK_MAGIC         0x736f636bu
#define PSCOM_SOCK_KEY_LEN 16 /* bytes; 32 hex digits after '#' in the endpoint string */

struct pscom_sock {
    pscom_socket_t pub;
    list_head_t next; /* in pscom_global.sockets */
    uint32_t magic;
    list_head_t cons;
    list_head_t recvq_any;
    list_head_t genq_any;
    list_head_t precons; /* incoming handshakes not yet bound to a connection */
    int listen_fd;
    pscom_ufd_t listen_ufd;
    char ep[PSCOM_EP_STR_MAX];
    char addr[PSCOM_EP_STR_MAX]; /* "ip:port": identity for the tie-break */
    size_t con_userdata_size;
    const pscom_plugin_t *tag_plugin; /* matches this socket's tagged messages (pscom_tag.c) */
    uint32_t bind_ip; /* pscom_listen_addr's address (network order); 0: every interface */
    char service[16]; /* pscom_socket_set_service: what its connections ask the peer for */
    uint8_t key[PSCOM_SOCK_KEY_LEN]; /* in our endpoint string; connectors prove they know it */
    int sealed;                      /* pscom_socket_seal: refuse a handshake without proof */
    char serves[16]; /* pscom_socket_serve: the service whose incoming connections it takes */
};

static inline pscom_sock_t *get_sock(pscom_socket_t *pub)
{
    return list_entry(pub, pscom_sock_t, pub);
}

/* ---- global state ---- */

typedef struct pscom_global {
    int initialized;
    int threaded;
    pthread_mutex_t lock;
    list_head_t sockets;
    uint64_t recv_seq;
    int pid;
    char hostname[64];
    uint64_t node_id;
    unsigned long ip; /* our address for endpoint strings, network order */
    uint64_t fc_pool; /* PSP_UNEXPECTED_MAX less what connections reserved (pscom_fc.c) */
} pscom_global_t;

extern pscom_global_t pscom_global;

/* configuration (rows in pscom_init.c) */
typedef struct pscom_config {
    int debug, debug_contype, debug_stats, debug_param, sigquit, sched_yield;
    int oversubscribed; /* pscom_set_oversubscribed, not an environment row */
    int node_processes; /* pscom_set_node_processes; 0: not known */
    const char *debug_out, *network, *plugindir;
    pscom_env_size_opt_t rendezvous; /* PSP_RENDEZVOUS; not set: the transports' own */
    size_t unexpected_max;           /* PSP_UNEXPECTED_MAX (pscom_fc.c) */
    unsigned spin_us, fd_poll_us, connect_timeout_ms, shutdown_timeout_ms, peer_timeout_ms;
    unsigned poll_pause;
    unsigned poll_spin;
} pscom_config_t;
extern pscom_config_t pscom_config;

/* A spinning poller's pause (PSP_POLL_PAUSE) after its idle_polls-th poll in a row that found
   nothing: it then reloads the line a sender is writing less often, which helped where the
   peer runs on another core (MPI 8 B over shm 0.34 -> 0.32 us), but delays a message from a
   sibling hyperthread, which comes within a few polls (0.16 -> 0.19-0.22 us): the first
   PSP_POLL_SPIN idle polls go without. */
static inline void pscom_poll_pause(unsigned idle_polls)
{
    if (idle_polls < pscom_config.poll_spin)
        return;
    for (unsigned i = pscom_config.poll_pause; i; i--) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#else
        __asm__ __volatile__("" ::: "memory");
#endif
    }
}

static inline void pscom_lock(void)
{
    if (pscom_global.threaded)
        pthread_mutex_lock(&pscom_global.lock);
}

static inline void pscom_unlock(void)
{
    if (pscom_global.threaded)
        pthread_mutex_unlock(&pscom_global.lock);
}

/* ---- internal functions (callers hold the lock) ---- */

/* pscom_cuda.c */
void pscom_cuda_init(void);
void pscom_cuda_cleanup(void);
/* CUDA IPC (pscom_cuda.c): 1 if device memory may go by device rendezvous in this run */
int pscom_cuda_ipc_enabled(void);
size_t pscom_cuda_ipc_min(void);
/* export: the allocation that holds ptr, and ptr's offset in it; 0, else -1 */
int pscom_cuda_ipc_export(const void *ptr, rndv_gpu_t *out);
/* len bytes at the exported buffer to dst (device or host memory); 0, else -1 */
int pscom_cuda_ipc_copy(void *dst, const rndv_gpu_t *from, size_t len);

/* pscom_env.c */
void pscom_env_parse_table(const pscom_env_row_t *table);
int pscom_env_is_set(const char *name);

/* pscom_log.c */
void pscom_log_init(void);
const char *pscom_log_prefix_name(void);
void pscom_log_set_name(const char *name);
void pscom_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* pscom_plugin.c */
void pscom_plugins_init(void);
void pscom_plugins_destroy(void);
void pscom_plugins_activate_all(void); /* load the deferred ones: their status and rows */
int pscom_plugin_count(void);
const pscom_plugin_t *pscom_plugin_get(int index); /* usable plugins in selection order */
size_t pscom_plugin_rendezvous(const pscom_plugin_t *plugin);
int pscom_plugin_rendezvous_user_set(const pscom_plugin_t *plugin);
int pscom_plugin_index(const char *name);
const pscom_plugin_t *pscom_plugin_relay(int index); /* loaded plugins with con_relay, in order */

/* pscom_reactor.c */
void pscom_reactor_init(void);
void pscom_reactor_destroy(void);
int pscom_progress_poll(void); /* one non-blocking round; nonzero: something happened */
void pscom_progress_block(int timeout_ms);
void pscom_wait_until(int (*done)(void *), void *arg);
extern int pscom_reactor_blocker; /* threaded mode: a thread blocks (1), and was woken (2) */
void pscom_reactor_wake_blocker(void);

/* pscom_sock.c */
void pscom_sock_close(pscom_sock_t *sock);
pscom_sock_t *pscom_sock_serving(const char *service); /* pscom_socket_serve's socket, or NULL */
pscom_sock_t *pscom_sock_by_addr(const char *addr);    /* the socket listening at "ip:port" */

/* pscom_con.c */
pscom_con_t *pscom_con_create(pscom_sock_t *sock);
void pscom_con_set_name(pscom_con_t *con);
void pscom_con_established(pscom_con_t *con, const pscom_plugin_t *plugin, int fd);
void pscom_con_fail(pscom_con_t *con, pscom_op_t op, pscom_err_t err);
void pscom_con_free(pscom_con_t *con);
void pscom_con_start_connect(pscom_con_t *con);
/* Start the connects that waited for a peer's own attempt to settle (pscom_con_start_connect) */
void pscom_con_start_deferred(pscom_sock_t *sock);
pscom_con_t *pscom_con_find_by_addr(pscom_sock_t *sock, const char *addr);
int pscom_ep_addr(const char *ep, char *addr, size_t addrlen, char *name, size_t namelen);
/* The key of an endpoint string ("#" and 32 hex digits after the name) into key; 0 if it has
   one, -1 if not (key zeroed). */
int pscom_ep_key(const char *ep, uint8_t key[16]);
void pscom_key_hex(const uint8_t key[16], char hex[33]);

/* pscom_sockutil.c */
int socket_fd_listen(int portno);
int socket_fd_listen_at(uint32_t ip, int portno); /* ip in network order */
int socket_fd_connect(const char *addr);
void socket_fd_peer_str(int fd, char *buf, size_t len);
void socket_fd_watch_peer(int fd);

/* pscom_precon.c: the handshake on a fresh TCP connection */
precon_t *pscom_precon_accept(pscom_sock_t *sock, int fd);
precon_t *pscom_precon_connect(pscom_con_t *con);
void pscom_precon_destroy(precon_t *pre);
void pscom_precon_dump(const precon_t *pre, FILE *out); /* PSP_SIGQUIT */
void pscom_precon_check_timeouts(void);

/* pscom_io.c */
void pscom_req_complete(pscom_req_t *req);
void pscom_con_queue_send(pscom_con_t *con, pscom_req_t *req);
pscom_req_t *pscom_req_create_internal(size_t xheader_len, size_t data_len);
void pscom_send_ctrl(pscom_con_t *con, uint8_t type, const void *xh, size_t xlen, const void *data,
                     size_t dlen);
void pscom_send_ctrl_first(pscom_con_t *con, uint8_t type, const void *xh, size_t xlen);
void pscom_con_fail_requests(pscom_con_t *con, pscom_err_t err);
pscom_req_t *pscom_recv_match(pscom_con_t *con, pscom_header_net_t *hdr, int rndv);
void pscom_con_drop_generated(pscom_con_t *con);
size_t pscom_pad_prefix(const pscom_con_t *con, unsigned char *dst, size_t before,
                        uint64_t data_len);

/* pscom_tag.c */
void pscom_tag_con_ready(pscom_con_t *con);  /* established: send what waited */
void pscom_tag_con_failed(pscom_con_t *con); /* fail what waited */
void pscom_tag_sock_closed(pscom_sock_t *sock);
const pscom_plugin_t *pscom_plugin_tag_transport(char *why, size_t whylen); /* pscom_plugin.c */
void pscom_plugin_dump(FILE *out);                 /* the loaded plugins' own dump (PSP_SIGQUIT) */
void pscom_plugin_counters(char *buf, size_t len); /* pscom_plugin.c */

/* pscom_fc.c: credit-based flow control of eager messages */
void pscom_fc_init(void);
void pscom_fc_con_ready(pscom_con_t *con); /* established: grant the peer its window */
void pscom_fc_con_free(pscom_con_t *con);
void pscom_fc_grant(pscom_con_t *con);       /* give back what fc_return holds */
void pscom_fc_grant_later(pscom_con_t *con); /* the same from the next progress round */
extern int pscom_fc_grants_due;
void pscom_fc_send_grants(void);
void pscom_fc_starved(pscom_con_t *con);                /* its sender ran out of credit */
void pscom_fc_park(pscom_con_t *con, pscom_req_t *gen); /* unexpected rendezvous for credit */
void pscom_fc_unpark(pscom_req_t *gen);                 /* taken, failed or freed */
int pscom_fc_credit_received(pscom_con_t *con, const pscom_header_net_t *hdr); /* -1: bad */
void pscom_fc_gen_held(pscom_req_t *gen, uint64_t cost);     /* an unexpected message waits */
void pscom_fc_gen_taken(pscom_con_t *con, pscom_req_t *gen); /* a receive took it */
void pscom_fc_gen_dropped(pscom_req_t *gen);                 /* freed untaken */
void pscom_fc_check_stalls(void); /* a wait that blocks: say once if credit holds a send up */

/* Send: 1 if a message of this size may go eager (its cost is taken from the credit). */
static inline int pscom_fc_take(pscom_con_t *con, size_t xheader_len, uint64_t data_len)
{
    int64_t cost = (int64_t)pscom_fc_cost(xheader_len, data_len);
    if (__builtin_expect(cost > con->fc_credit, 0))
        return 0;
    con->fc_credit -= cost;
    return 1;
}

/* Receive: a message of this cost was taken by a receive; its bytes go back to the sender in
   batches of a quarter window. */
static inline void pscom_fc_consumed(pscom_con_t *con, uint64_t cost)
{
    con->fc_return += cost;
    /* not from here: this runs inside the parser (and inside a receive's posting), and a
       send may fail the connection or make a transport read */
    if (__builtin_expect(con->fc_return >= con->fc_window / 4, 0))
        pscom_fc_grant_later(con);
}

/* pscom_rndv.c */
void pscom_rndv_prepare_send(pscom_con_t *con, pscom_req_t *req);
int pscom_rndv_fetch_ahead(pscom_con_t *con, pscom_req_t *gen, uint64_t cost);
/* A send of device memory goes from a page-locked host copy (RQ_GPU_HOST, freed when it
   completes): 0, or -1 when there was no memory (no flag) or the copy failed (zeros sent) */
int pscom_rndv_stage_gpu(pscom_req_t *req);
pscom_req_t *pscom_rndv_dispatch(pscom_con_t *con, pscom_header_net_t *hdr);
void pscom_rndv_start_pull(pscom_con_t *con, pscom_req_t *req);

/* pscom_req.c */
pscom_req_t *pscom_req_alloc(size_t max_xheader_len, size_t user_size);
void pscom_req_release(pscom_req_t *req);

#endif
