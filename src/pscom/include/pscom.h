/*
 * pscom.h - public API of libpscom, reliable ordered messaging between processes.
 *
 * Model (see README.md next to this directory):
 *   socket      a listening endpoint; owns connections and the ANY-source queues.
 *   connection  one per peer; carries one transport (shm, tcp, ...), chosen at connect time.
 *   request     a send or receive of one message: a small user header ("xheader", at most
 *               PSCOM_XHEADER_MAX bytes) plus data of any size (wire limit PSCOM_DATA_LEN_MAX).
 *
 * Matching belongs to the user: a receive carries a recv_accept() callback that looks at the
 * incoming message's header and says yes or no. Messages that no posted receive accepts are
 * offered to the socket's default_recv() hook and otherwise become "generated" requests, kept
 * per connection and per socket in arrival order until a receive or probe finds them.
 *
 * Progress is made only inside pscom calls. Completion runs the request's io_done() callback
 * from inside a pscom call. pscom knows nothing of MPI.
 */
#ifndef PSCOM_H_INCLUDED
#define PSCOM_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* API version: major << 8 | minor. pscom_init() refuses a different major or a newer minor. */
#define PSCOM_VERSION_MAJOR 1
#define PSCOM_VERSION_MINOR                                                                        \
    9 /* 9: pscom_set_node_processes; 8: device rendezvous (pscom_post_send_gpu,                   \
         pscom_post_recv_gpu); 7: device memory (pscom_is_gpu_mem, pscom_gpu_memcpy, host          \
         buffers); 6: pscom_socket_seal, keys in endpoint strings; 5: pscom_listen_addr,           \
         pscom_socket_set_service, pscom_socket_serve; 4:                                          \
         PSCOM_ENV_SIZE_OPT, pscom_env_get; 3: PSCOM_TAG_DONE_INLINE; 2: tag matching in the       \
         transport; 1: pscom_set_oversubscribed */
#define PSCOM_VERSION ((PSCOM_VERSION_MAJOR << 8) | PSCOM_VERSION_MINOR)

/* Largest user header of one message. */
#define PSCOM_XHEADER_MAX 4096
/* Largest data of one message that the wire format carries (48 bits: 256 TiB). */
#define PSCOM_DATA_LEN_MAX ((1ULL << 48) - 1)
/* Longest endpoint string, including the terminating NUL. */
#define PSCOM_EP_STR_MAX 128
/* Longest socket name ("r0000003"), including the NUL. */
#define PSCOM_NAME_MAX 16

#define PSCOM_ANYPORT (-1)

typedef enum pscom_err {
    PSCOM_SUCCESS = 0,
    PSCOM_ERR_STDERROR = -1, /* see errno */
    PSCOM_ERR_INVALID = -2,  /* bad argument */
    PSCOM_ERR_ALREADY = -3,  /* already done (e.g. connect twice) */
    PSCOM_NOT_IMPLEMENTED = -4,
    PSCOM_ERR_EOF = -5,     /* peer closed the connection */
    PSCOM_ERR_IOERROR = -6, /* transport failed; peer probably died */
    PSCOM_ERR_UNSUPPORTED_VERSION = -7,
    PSCOM_ERR_CONNECTION_REFUSED = -8,
    PSCOM_ERR_PROTOCOL = -9, /* peer sent something malformed */
    PSCOM_ERR_NOMEM = -10,
} pscom_err_t;

typedef enum pscom_op {
    PSCOM_OP_READ = 1,
    PSCOM_OP_WRITE = 2,
    PSCOM_OP_CONNECT = 3,
    PSCOM_OP_RW = 4,
} pscom_op_t;

typedef enum pscom_con_state {
    PSCOM_CON_STATE_NO_RW = 0,
    PSCOM_CON_STATE_ONDEMAND = 1, /* address known; connects on first send */
    PSCOM_CON_STATE_CONNECTING = 2,
    PSCOM_CON_STATE_ACCEPTING = 3,
    PSCOM_CON_STATE_RW = 4, /* established */
    PSCOM_CON_STATE_CLOSING = 5,
    PSCOM_CON_STATE_CLOSED = 6, /* orderly closed by either side */
    PSCOM_CON_STATE_ERROR = 7,  /* broken; see the error callback */
} pscom_con_state_t;

/* Request state bits. */
#define PSCOM_REQ_STATE_SEND       0x00000001u
#define PSCOM_REQ_STATE_RECV       0x00000002u
#define PSCOM_REQ_STATE_GRECV      0x00000004u /* generated: an unexpected message */
#define PSCOM_REQ_STATE_POSTED     0x00000008u
#define PSCOM_REQ_STATE_IO_STARTED 0x00000010u
#define PSCOM_REQ_STATE_IO_DONE    0x00000020u
#define PSCOM_REQ_STATE_ERROR      0x00000040u
#define PSCOM_REQ_STATE_CANCELED   0x00000080u
#define PSCOM_REQ_STATE_TRUNCATED  0x00000100u
#define PSCOM_REQ_STATE_DONE       0x00000200u /* io_done has been called (or is running) */
#define PSCOM_REQ_STATE_RENDEZVOUS 0x00000400u
#define PSCOM_REQ_STATE_MERGED     0x00000800u /* a receive that took over a generated one */
#define PSCOM_REQ_STATE_GPU_DIRECT 0x00001000u /* pscom_post_recv_gpu: the data is in dev */

typedef struct pscom_socket pscom_socket_t;
typedef struct pscom_connection pscom_connection_t;
typedef struct pscom_request pscom_request_t;

/*
 * The header of a message as it travels. The user header (xheader_len bytes) follows it
 * directly in memory wherever pscom hands a header to a callback: use pscom_header_xheader().
 */
typedef struct pscom_header_net {
    uint64_t data_len;    /* bytes of data that follow the xheader */
    uint16_t xheader_len; /* bytes of user header */
    uint8_t msg_type;     /* PSCOM_MSGTYPE_USER for every user message */
    uint8_t version;      /* wire version; checked on receipt */
    uint32_t reserved;    /* zero */
} pscom_header_net_t;

#define PSCOM_MSGTYPE_USER 0

static inline void *pscom_header_xheader(const pscom_header_net_t *header)
{
    return (void *)(header + 1);
}

/* ---------------------------------------------------------------------------------------- */
/* Library */

/* Initialise the library. version: PSCOM_VERSION. Safe to call more than once. */
pscom_err_t pscom_init(int version);
/* Like pscom_init, and every later call is serialised by one library lock. */
pscom_err_t pscom_init_thread(int version);
/* Close all sockets and release everything. Also runs at exit. */
void pscom_cleanup(void);
/* Version the library was built with, as "major.minor.patch". */
const char *pscom_version_str(void);
/* Change PSP_DEBUG at run time. */
void pscom_set_debug(int level);
/* This node runs more processes than they have CPUs (the caller knows, e.g. from its launcher):
   transports then prefer protocols that do not wait for a peer process to be scheduled (shm:
   eager up to 128 KiB instead of single-copy rendezvous from 8 KiB). A threshold the user set
   (PSP_RENDEZVOUS, PSP_<NAME>_RENDEZVOUS) still wins. Affects connections made afterwards. */
void pscom_set_oversubscribed(int oversubscribed);
/* This node runs n processes of the caller's job (e.g. from its launcher): transports size what
   each connection holds by it (shm: smaller rings where a process may open hundreds of shm
   connections). Affects connections made afterwards; 0: not known. */
void pscom_set_node_processes(int n);
/* Readable text for an error code. */
const char *pscom_err_str(pscom_err_t err);
/* Dump sockets, connections, pending requests and counters (what PSP_SIGQUIT prints). */
void pscom_dump_info(FILE *out);

/* ---------------------------------------------------------------------------------------- */
/* Sockets */

struct pscom_socket_ops {
    /* A peer connected to this socket that no pscom_connect() announced. May be NULL. */
    void (*con_accept)(pscom_connection_t *con);
    /* A connection failed or was closed by the peer. Called once per connection. May be NULL. */
    void (*con_error)(pscom_connection_t *con, pscom_op_t op, pscom_err_t err);
    /*
     * A message arrived that no posted receive accepted. Return a receive request to take it
     * (its data buffer must hold header->data_len bytes or the message is truncated), or NULL
     * to queue it as a generated request. The netmod carries its active messages through this.
     */
    pscom_request_t *(*default_recv)(pscom_connection_t *con, pscom_header_net_t *header);
};

struct pscom_socket {
    struct pscom_socket_ops ops;
    int listen_portno; /* -1 while not listening */
    char local_name[PSCOM_NAME_MAX];
    size_t userdata_size;
    void *userdata; /* userdata_size bytes, zeroed, owned by the user */
};

/* Open a socket with userdata_size bytes for the user and con_userdata_size per connection. */
pscom_socket_t *pscom_open_socket(size_t userdata_size, size_t con_userdata_size);
/* Name this socket (at most PSCOM_NAME_MAX-1 chars), e.g. "r0000003"; used in logs and ep. */
void pscom_socket_set_name(pscom_socket_t *socket, const char *name);
/* Refuse connections whose handshake does not prove knowledge of this socket's key (the
   random 128-bit key every socket has, in its endpoint string "ip:port@name#key"): only who
   was given the endpoint string connects. A connector proves it by HMAC over both sides'
   nonces, so a captured handshake does not replay. Handshakes for a service (the peer's
   plugin, pscom_socket_serve) follow the serving socket's seal instead. */
void pscom_socket_seal(pscom_socket_t *socket);
/* Listen on a TCP port (PSCOM_ANYPORT: any). Needed before others can connect to us. */
pscom_err_t pscom_listen(pscom_socket_t *socket, int portno);
/* Listen on one local address "ip:port" (port 0: any) instead of on every interface; the
   endpoint string then carries that address (a daemon on a node with two networks). */
pscom_err_t pscom_listen_addr(pscom_socket_t *socket, const char *addr);
/* The connections this socket opens ask the peer's process for a service (a transport plugin's
   name, e.g. "gw") instead of the socket they reach: how a gateway daemon reaches the gateway
   plugin of a rank through the rank's own listener. */
void pscom_socket_set_service(pscom_socket_t *socket, const char *service);
/* This socket takes the incoming connections that ask for service, whichever listener of this
   process they reach; connections asking for a service nobody serves are refused. */
void pscom_socket_serve(pscom_socket_t *socket, const char *service);
/* Stop accepting new connections; established ones stay. */
void pscom_stop_listen(pscom_socket_t *socket);
/*
 * Endpoint string that peers pass to pscom_connect(): "ip:port@name". Valid while the socket
 * lives and listens. NULL when not listening.
 */
const char *pscom_socket_get_ep_str(pscom_socket_t *socket);
/* Close a socket with all its connections (each flushes its sends first). NULL: all sockets. */
void pscom_close_socket(pscom_socket_t *socket);

/* ---------------------------------------------------------------------------------------- */
/* Connections */

#define PSCOM_CON_FLAG_DIRECT   0x1 /* connect now and wait until established */
#define PSCOM_CON_FLAG_ONDEMAND 0x2 /* connect on the first send (or when the peer connects) */

struct pscom_connection {
    pscom_socket_t *socket;
    pscom_con_state_t state;
    const char *transport; /* "shm", "tcp", ...; "ondemand" or "none" before connecting */
    size_t userdata_size;
    void *userdata; /* con_userdata_size bytes, zeroed */
};

typedef struct pscom_con_info {
    char transport[16];
    char peer_ep[PSCOM_EP_STR_MAX]; /* peer's endpoint string ("" if the peer has none) */
    char peer_name[PSCOM_NAME_MAX];
    char peer_host[64];
    int peer_pid;
    pscom_con_state_t state;
} pscom_con_info_t;

/* A new, unconnected connection object of this socket. */
pscom_connection_t *pscom_open_connection(pscom_socket_t *socket);
/*
 * Connect to the socket with endpoint string ep_str. flags: PSCOM_CON_FLAG_DIRECT (blocks until
 * connected or failed) or PSCOM_CON_FLAG_ONDEMAND (returns at once). If both peers connect to
 * each other at the same time, they end up with one connection.
 */
pscom_err_t pscom_connect(pscom_connection_t *con, const char *ep_str, int flags);
/*
 * Start connecting an on-demand connection now and return at once (for programs that open
 * all their connections at start-up and then wait for them: see pscom_con_settled).
 * PSCOM_ERR_ALREADY if it is not on demand any more (connecting, connected or closed).
 */
pscom_err_t pscom_con_connect_now(pscom_connection_t *con);
/* 1 when con is connected or has failed for good (state RW, or CLOSED and beyond). */
int pscom_con_settled(pscom_connection_t *con);
/* Flush pending sends, tell the peer, release the connection. con is invalid afterwards. */
void pscom_close_connection(pscom_connection_t *con);
/* Fill info for con. */
void pscom_con_info(pscom_connection_t *con, pscom_con_info_t *info);
/* One line describing con: "r0000004 (10.0.0.2:4711, pid 123) via shm". Static buffer. */
const char *pscom_con_str(pscom_connection_t *con);
/* Iterate a socket's connections: pass NULL to start; returns NULL after the last. */
pscom_connection_t *pscom_get_next_connection(pscom_socket_t *socket, pscom_connection_t *con);

/* ---------------------------------------------------------------------------------------- */
/* Requests */

struct pscom_request_ops {
    /*
     * Receive only: does this request take the message with this header (xheader follows it)?
     * con is the connection it came from. Return nonzero to accept. NULL accepts everything.
     */
    int (*recv_accept)(pscom_request_t *req, pscom_connection_t *con, pscom_header_net_t *header);
    /* Called once when the request is complete (check state for ERROR/CANCELED/TRUNCATED). */
    void (*io_done)(pscom_request_t *req);
};

struct pscom_request {
    unsigned int state; /* PSCOM_REQ_STATE_* bits; read only */
    size_t xheader_len; /* send: bytes of xheader to send; recv: bytes received */
    size_t data_len;    /* send: bytes to send; recv: buffer size, then bytes received */
    void *data;
    pscom_connection_t *connection; /* send: target; recv: source or NULL for any */
    pscom_socket_t *socket;         /* recv with connection == NULL: the socket to receive on */
    struct pscom_request_ops ops;
    size_t user_size;
    void *user; /* user_size bytes for the caller, zeroed at create */
    size_t max_xheader_len;
    void *xheader; /* max_xheader_len bytes; == pscom_header_xheader(&header) */
    /* Received message's header (recv) or the header that was sent. Keep last: the
       xheader storage follows it in memory. */
    pscom_header_net_t header;
};

/* A request with room for an xheader of max_xheader_len bytes and user_size bytes of user data. */
pscom_request_t *pscom_request_create(size_t max_xheader_len, size_t user_size);
/* Free a request that is not pending (DONE, or never posted). */
void pscom_request_free(pscom_request_t *req);

/*
 * Send req->xheader (req->xheader_len bytes) and req->data (req->data_len bytes) on
 * req->connection. Eager or rendezvous is chosen per transport. The buffer must stay untouched
 * until io_done. Messages on one connection arrive in the order they were posted. A message the
 * transport takes at once completes (io_done runs) before this returns.
 */
void pscom_post_send(pscom_request_t *req);
/*
 * Post a receive: from req->connection, or from any connection of req->socket when
 * req->connection is NULL. Generated requests (unexpected messages) are searched first.
 */
void pscom_post_recv(pscom_request_t *req);

/*
 * Probe for a message that req would accept (same fields as for post_recv). On a match,
 * return 1 and fill req->header, req->xheader, req->xheader_len, req->data_len and
 * req->connection; the message stays queued. Makes progress once.
 */
int pscom_iprobe(pscom_request_t *req);
/* Blocking form of pscom_iprobe. */
void pscom_probe(pscom_request_t *req);

/* Cancel a posted receive that has not begun to receive. Returns 1 if cancelled. */
int pscom_cancel_recv(pscom_request_t *req);

/* Make progress on all sockets; wait up to timeout_ms (0: poll, -1: forever) if nothing
   happens. Returns nonzero if anything happened. */
int pscom_progress(int timeout_ms);
/* Wait until req is DONE. */
void pscom_wait(pscom_request_t *req);
/* Wait until all requests in the NULL-terminated array are DONE. */
void pscom_wait_all(pscom_request_t **reqs);
/* Wait until one of the NULL-terminated array is DONE; returns its index. */
int pscom_wait_any(pscom_request_t **reqs);
/* Progress once; returns 1 if req is DONE. */
int pscom_test(pscom_request_t *req);

static inline int pscom_req_is_done(const pscom_request_t *req)
{
    return (req->state & PSCOM_REQ_STATE_DONE) != 0;
}

static inline int pscom_req_successful(const pscom_request_t *req)
{
    return (req->state & (PSCOM_REQ_STATE_ERROR | PSCOM_REQ_STATE_CANCELED |
                          PSCOM_REQ_STATE_TRUNCATED | PSCOM_REQ_STATE_DONE)) ==
           PSCOM_REQ_STATE_DONE;
}

/* Send a copy of xheader and data; returns at once, the buffers may be reused immediately. */
void pscom_send(pscom_connection_t *con, const void *xheader, size_t xheader_len, const void *data,
                size_t data_len);
/* The fast path of a small send: if con is connected, has nothing queued and its transport
   takes the whole message (eager, below the rendezvous threshold) at once, send it and return
   1: the buffers are free again and no request was needed. Else 0 and nothing was sent: post a
   request (pscom_post_send). Same wire message as pscom_post_send. */
int pscom_send_now(pscom_connection_t *con, const void *xheader, size_t xheader_len,
                   const void *data, size_t data_len);
/*
 * Blocking receive of the next message from con (or any connection of socket if con is NULL)
 * into xheader/data buffers. Returns PSCOM_SUCCESS, or an error (truncation or a broken
 * connection). On success *con_out (if not NULL) names the source.
 */
pscom_err_t pscom_recv(pscom_connection_t *con, pscom_socket_t *socket, void *xheader,
                       size_t xheader_len, void *data, size_t data_len,
                       pscom_connection_t **con_out);

const char *pscom_req_state_str(unsigned int state);

/* ---------------------------------------------------------------------------------------- */
/*
 * Tag matching in the transport. A transport that matches messages itself (UCX) can take over
 * the matching of one socket's tagged messages: a message carries a 64-bit tag, a receive
 * names a tag and a mask (the bits that must be equal), and the transport's own queues match
 * them, with no pscom request, header or recv_accept on the way. Receives are socket-wide: the
 * tag names the source where that matters. Messages of one connection match in the order they
 * were sent; tagged messages and pscom's own (pscom_post_send) are not ordered with each other.
 *
 * It is offered only where that transport carries every connection of the socket (it is the one
 * transport enabled; the socket's connections of the process to itself then take it too), and
 * to one socket per process (the transport's queues are the process's). Turn it on before the
 * socket's first connection; both ends of a connection must have it on (a connection between
 * one end with it and one without fails at connect).
 */
typedef enum pscom_tag_status {
    PSCOM_TAG_DONE = 0,
    PSCOM_TAG_TRUNCATED = 1, /* receive: the message was longer than the buffer */
    PSCOM_TAG_CANCELED = 2,  /* receive: pscom_tag_cancel took it back */
    PSCOM_TAG_FAILED = 3,    /* the connection or the transport failed */
} pscom_tag_status_t;

typedef struct pscom_tag_info {
    uint64_t tag; /* the message's tag */
    size_t len;   /* its length (the whole message, also when truncated) */
} pscom_tag_info_t;

/* Completion of an operation, with its user pointer; info: the message received (receives),
   NULL for sends. Runs inside a pscom call, once the transport has returned to pscom (it may
   call pscom then), or, with PSCOM_TAG_DONE_INLINE, inside the transport's own progress. */
typedef void (*pscom_tag_done_t)(void *user, pscom_tag_status_t status,
                                 const pscom_tag_info_t *info);

/* flags of pscom_socket_tag_matching: done() calls no pscom function, so the transport may run
   it at once, from inside its progress (no queue of completions on the way) */
#define PSCOM_TAG_DONE_INLINE 1u

/* Hand socket's tagged messages to its transport; done: the completion of each operation;
   flags: PSCOM_TAG_DONE_INLINE or 0. 1: on; 0: not possible here (pscom's own matching stays;
   PSP_DEBUG>=2 logs why). */
int pscom_socket_tag_matching(pscom_socket_t *socket, pscom_tag_done_t done, unsigned flags);
/* Is it on for socket? */
int pscom_socket_tag_on(pscom_socket_t *socket);
/* Send len bytes at buf with tag to con's peer (sync: complete only once a receive matched it).
   1: sent, buf is free again and done() is not called; 0: in flight, done() follows (buf must
   stay until then); < 0: a pscom_err_t, nothing sent (con broken or closed). A connection still
   to be made (on demand) is made now; its messages wait for it in order. */
int pscom_tag_send(pscom_connection_t *con, uint64_t tag, const void *buf, size_t len, int sync,
                   void *user);
/* Receive a message whose tag equals tag in the bits of mask into buf (at most len bytes).
   0: posted; done() follows, maybe before this returns: *op is then NULL, else a handle for
   pscom_tag_cancel until done() runs. < 0: a pscom_err_t, not posted. */
int pscom_tag_recv(pscom_socket_t *socket, uint64_t tag, uint64_t mask, void *buf, size_t len,
                   void *user, void **op);
/* Is a matching message there (arrived, not received)? 1 and info filled, or 0. With msg, the
   message is also taken out of matching: receive it with pscom_tag_msg_recv(*msg). */
int pscom_tag_probe(pscom_socket_t *socket, uint64_t tag, uint64_t mask, pscom_tag_info_t *info,
                    void **msg);
/* Receive a message taken by pscom_tag_probe. 0, and done() follows (maybe before this returns);
   or < 0. */
int pscom_tag_msg_recv(pscom_socket_t *socket, void *msg, void *buf, size_t len, void *user);
/* Take back a posted receive: done() with PSCOM_TAG_CANCELED now, or, if a message already
   matched it, normal completion later. */
void pscom_tag_cancel(pscom_socket_t *socket, void *op);

/* ---------------------------------------------------------------------------------------- */
/* Transports ("plugins") */

typedef struct pscom_plugin_info {
    char name[16];     /* "shm", "tcp", "ucp" */
    int priority;      /* built-in priority; higher is tried first */
    int user_prio;     /* PSP_<NAME>: 0 = disabled by the user */
    int available;     /* loaded and initialised */
    size_t rendezvous; /* eager/rendezvous threshold in bytes; SIZE_MAX = eager only */
    char status[160];  /* "built in", "loaded from /path", or why it is not available */
} pscom_plugin_info_t;

/* Info on the index'th known plugin in selection order. Returns 0, or -1 past the end.
   Loads dlopen'able plugins on first use. */
int pscom_plugin_info(int index, pscom_plugin_info_t *info);

/* ---------------------------------------------------------------------------------------- */
/* Device memory (CUDA). With PSP_CUDA=1 libpscom loads the CUDA driver at init. Message data
   is host memory, which the layer above stages device buffers in with these; except for the
   device rendezvous below, where a device buffer goes from process to process of one node
   in one driver copy. */

extern int pscom_cuda_on; /* 1: PSP_CUDA=1 and a driver and device were found */

/* 1 when device pointers may be given to the functions below (pscom_cuda_on). */
int pscom_is_cuda_enabled(void);
/* 1 with PSP_CUDA_ENFORCE_STAGING=1: no transport moves device memory itself. */
int pscom_cuda_enforce_staging(void);
int pscom_is_gpu_mem_query(const void *ptr);
/* 1 if ptr is device memory the CPU must not touch; managed memory counts as host. Costs one
   load without PSP_CUDA. */
static inline int pscom_is_gpu_mem(const void *ptr)
{
    return __builtin_expect(pscom_cuda_on, 0) && pscom_is_gpu_mem_query(ptr);
}
/* memcpy where either side may be device memory. PSCOM_ERR_IOERROR if the driver fails. */
pscom_err_t pscom_gpu_memcpy(void *dst, const void *src, size_t len);
/* A host buffer of at least len bytes for staging (page-locked with PSP_CUDA, from a small
   cache); *cap receives its size, which pscom_host_buffer_free wants back. NULL: no memory. */
void *pscom_host_buffer_alloc(size_t len, size_t *cap);
void pscom_host_buffer_free(void *buf, size_t cap);

#define PSCOM_GPU_IPC_HANDLE_SIZE 64 /* the driver's CUipcMemHandle */
/* 1 if len bytes of device memory may go to con with pscom_post_send_gpu: PSP_CUDA with a
   driver that shares memory between processes, PSP_CUDA_IPC on, no PSP_CUDA_ENFORCE_STAGING,
   a peer process on this node, and len >= PSP_CUDA_IPC_MIN. */
int pscom_con_gpu_direct(pscom_connection_t *con, size_t len);
/* pscom_post_send where req->data is device memory: always a rendezvous. The receiver copies
   from the buffer (device to device, or to its host buffer), or, where it cannot open it,
   asks for the data and the sender stages it in host memory. */
void pscom_post_send_gpu(pscom_request_t *req);
/* pscom_post_recv, and a message that comes by device rendezvous is copied to dev (device
   memory of at least req->data_len bytes) instead of req->data: the request's state then has
   PSCOM_REQ_STATE_GPU_DIRECT. Any other message lands in req->data as usual. */
void pscom_post_recv_gpu(pscom_request_t *req, void *dev);

/* ---------------------------------------------------------------------------------------- */
/* Configuration: every PSP_* variable is one row of a table (config as data). Upper layers
   register their own rows so that pscom_info and PSP_DEBUG_PARAM show them too. */

typedef enum pscom_env_type {
    PSCOM_ENV_INT,  /* int; target: int* */
    PSCOM_ENV_UINT, /* unsigned; target: unsigned* */
    PSCOM_ENV_SIZE, /* size_t with k/M/G suffix or "inf"; target: size_t* */
    PSCOM_ENV_BOOL, /* 0/1, yes/no, on/off, true/false; target: int* */
    PSCOM_ENV_STR,  /* string; target: const char** (points into environ or default) */
    /* a size as PSCOM_ENV_SIZE, or empty: no value; target: pscom_env_size_opt_t* */
    PSCOM_ENV_SIZE_OPT,
} pscom_env_type_t;

/* Target of a PSCOM_ENV_SIZE_OPT row: a size that may have no value, so that a row with an
   empty default tells "not set" from every value (PSP_RENDEZVOUS: the transports' own). */
typedef struct pscom_env_size_opt {
    size_t value; /* when set */
    int set;      /* 1: it has a value (not empty, not malformed) */
} pscom_env_size_opt_t;

typedef struct pscom_env_row {
    const char *name;  /* "PSP_DEBUG" */
    const char *deflt; /* default as text */
    const char *help;
    pscom_env_type_t type;
    void *target;
    int min, max; /* INT/UINT range check when min < max */
} pscom_env_row_t;

/* Register a table (terminated by a row with name NULL) under a group name and parse it now.
   The table must stay valid for the life of the process. */
void pscom_env_register(const char *group, const pscom_env_row_t *table);
/* Print all registered variables, those of transports not loaded yet included (it loads them);
   with_help adds the help text. (pscom_info -c [-d]) */
void pscom_env_print(FILE *out, int with_help);
/* The value of a registered variable as pscom_env_print shows it (a boolean as 0 or 1), for
   a layer above that needs another layer's setting: 0, or -1 when no table has it. */
int pscom_env_get(const char *name, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PSCOM_H_INCLUDED */
