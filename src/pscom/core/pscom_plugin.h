/*
 * pscom_plugin.h - the contract between pscom core and a transport plugin.
 *
 * A plugin is a directory with an ops table. Core never looks inside a plugin's state: a
 * connection carries one opaque pointer for its transport. Plugins see connections only
 * through the functions below.
 *
 * Life of a connection: the connecting side asks each usable plugin, in priority order, for an
 * offer (con_offer); the accepting side answers (con_accept) or declines; the connecting side
 * completes (con_finish) or declines. The first plugin that both sides complete carries the
 * connection: core calls con_start and hands it the handshake fd (a TCP socket), which the
 * plugin keeps (tcp: as the data stream; shm: as doorbell and peer-death detector).
 */
#ifndef PSCOM_PLUGIN_H_INCLUDED
#define PSCOM_PLUGIN_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include "pscom.h"
#include "pscom_list.h" /* list_head_t and its inline operations, for plugins' lists too */

/* 0x010c: node_processes; 0x010b: plugins register themselves (PSCOM_PLUGIN_DEFINE), counters,
   flags, con_relay, pscom_relay_accept, pscom_con_set_via, pscom_hmac.h (SHA-256, HMAC, random
   bytes, key files); 0x010a: pscom_cma_write; 0x0109: dump (con and plugin, for PSP_SIGQUIT),
   flushed; 0x0108: pscom_tag_ops_t.enable gets the socket's flags, recv the socket; 0x0107: tag
   matching (pscom_tag_ops_t, pscom_con_tag_on, pscom_con_set_tag_ep); 0x0106: node_oversubscribed;
   0x0105: header_user_xlen, read_feed_user, write_user_now; 0x0104: con_default_rendezvous; 0x0103:
   con_closing; 0x0102: write_now; 0x0101: held sends, cma */
#define PSCOM_PLUGIN_API_VERSION 0x010c
#define PSCOM_HS_BLOB_MAX        512 /* largest handshake blob of one plugin */

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* CLOCK_MONOTONIC in ns: the one clock of core and the plugins (timeouts, waits, timings) */
static inline uint64_t pscom_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* memcpy of message data. glibc copies from ~2-4 KiB up to the L2 size (on AMD) with `rep
   movsb`, which AMD EPYC runs 10-30x slower when source and destination are not aligned alike
   (4 KiB 1.5 us instead of 60 ns), and message data sits at any 8-byte offset in shm rings, UCX's
   buffers and user buffers. Pieces of 2 KiB take glibc's vector loop instead, as fast as its
   best case; from 1 MiB on glibc copies without `rep movsb`. The piece's size is hidden from
   gcc: with a constant size it inlines the copy as `rep movsq`, which has the same cliff (8 KiB
   at 12 instead of 52 GB/s on EPYC; 43 instead of 66 where aligned). */
#define PSCOM_COPY_PIECE      2048
#define PSCOM_COPY_PIECES_MAX (1u << 20)
static inline void pscom_memcpy(void *dst, const void *src, size_t n)
{
    if (n > PSCOM_COPY_PIECE && n < PSCOM_COPY_PIECES_MAX) {
        char *d = dst;
        const char *s = src;
        size_t piece = PSCOM_COPY_PIECE;
        __asm__("" : "+r"(piece)); /* a call to glibc, not an inline `rep movsq` */
        for (; n > piece; n -= piece) {
            memcpy(d, s, piece);
            d += piece;
            s += piece;
        }
        memcpy(d, s, n);
        return;
    }
    memcpy(dst, src, n);
}

/* memcpy of a user header or a small message's data: 4 to 16 bytes inline (two overlapping
   loads and stores), as a libc call that costs more than the copy on the message path */
static inline void pscom_copy_small(void *dst, const void *src, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, (const char *)src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy((char *)dst + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, (const char *)src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy((char *)dst + n - 4, &b, 4);
    } else if (n) {
        memcpy(dst, src, n);
    }
}

/* A message's data, small or large */
static inline void pscom_copy_data(void *dst, const void *src, size_t n)
{
    if (n <= 16)
        pscom_copy_small(dst, src, n);
    else
        pscom_memcpy(dst, src, n);
}

typedef struct pscom_con pscom_con_t;
typedef struct pscom_req pscom_req_t; /* opaque to plugins */

/* exported so that dlopen'ed plugins (libpscom4<name>.so) can call back into core */
#ifndef PSCOM_PLUGIN_API /* pscom_hmac.h defines it the same way */
#define PSCOM_PLUGIN_API __attribute__((visibility("default")))
#endif

/* SHA-256, HMAC-SHA-256, random bytes and key files (challenge-response authentication) */
#include "pscom_hmac.h"

/* Per-connection data path of a transport (set in con_start). */
typedef struct pscom_con_ops {
    /* The send queue became non-empty: write what can be written now. */
    void (*write_start)(pscom_con_t *con);
    /* Release the transport (after the EOF exchange, or on error). Must not call back. */
    void (*close)(pscom_con_t *con);
    /* Optional single-copy pull of len bytes at the peer's address into dst (rendezvous).
       Returns 0 on success, -1 when not possible (core then falls back to a software read). */
    int (*rndv_pull)(pscom_con_t *con, void *dst, uint64_t remote_addr, size_t len);
    /* Optional: nothing is queued, send this one whole message (n iov entries, len bytes) now
       if the transport can take all of it at once without keeping the buffers. 1: sent, 0:
       not now (core queues it as usual; a failure shows there). Must not call back. */
    int (*write_now)(pscom_con_t *con, const struct iovec *iov, int n, size_t len);
    /* Optional, preferred to write_now: the same for a user message given by its parts, for
       a transport that leaves the pscom header off the wire (pscom_read_feed_user). */
    int (*write_user_now)(pscom_con_t *con, const void *xheader, size_t xlen, const void *data,
                          size_t dlen);
    /* Optional: the transport's state of the connection for the SIGQUIT dump (PSP_SIGQUIT), in
       lines starting with four spaces: what a stuck connection waits for. Called from a signal
       handler of a process that is hung anyway: it only reads. */
    void (*dump)(pscom_con_t *con, FILE *out);
    /* Optional, for a transport that completes sends before they left (copies it queues while
       the peer has no room): 1 when it holds none for con. A closing connection waits for that
       before its EOF counts as sent (PSP_SHUTDOWN_TIMEOUT). */
    int (*flushed)(pscom_con_t *con);
} pscom_con_ops_t;

/* Optional: a transport that matches tagged messages itself (pscom.h, "Tag matching in the
   transport"). Core hands it the matching only of a socket all of whose connections it carries;
   its queues are process-wide. The calls return as pscom_tag_send and friends. */
typedef struct pscom_tag_ops {
    /* Can it match tags here? 1, or 0 with why (e.g. switched off by the user). Once, before
       enable. */
    int (*usable)(char *why, size_t whylen);
    /* From now on: completions go to done (with the operation's user pointer); flags:
       pscom_socket_tag_matching's (PSCOM_TAG_DONE_INLINE). */
    void (*enable)(pscom_tag_done_t done, unsigned flags);
    /* ep: what the transport gave for the connection (pscom_con_set_tag_ep) */
    int (*send)(void *ep, uint64_t tag, const void *buf, size_t len, int sync, void *user);
    /* socket: pscom_tag_recv's, so that the call passes its arguments on as they are */
    int (*recv)(pscom_socket_t *socket, uint64_t tag, uint64_t mask, void *buf, size_t len,
                void *user, void **op);
    int (*probe)(uint64_t tag, uint64_t mask, pscom_tag_info_t *info, void **msg);
    int (*msg_recv)(void *msg, void *buf, size_t len, void *user);
    void (*cancel)(void *op);
} pscom_tag_ops_t;

/* A plugin's own counter, printed by PSP_DEBUG_STATS and PSP_SIGQUIT after core's as
   "<plugin> <name> <value>". */
typedef struct pscom_counter {
    const char *name;
    uint64_t *value;
} pscom_counter_t;

/* pscom_plugin_t.flags */
#define PSCOM_PLUGIN_SELF 0x1 /* connects a process only to itself (loop): not a user's choice */

typedef struct pscom_plugin {
    /* name and api_version stay the first two fields: core reads them from a plugin built
       against another version to refuse it */
    const char *name;           /* "shm": also the PSP_SHM, PSP_SHM_RENDEZVOUS variable names */
    unsigned int api_version;   /* PSCOM_PLUGIN_API_VERSION */
    int priority;               /* built-in priority, higher first */
    size_t rendezvous;          /* default eager/rendezvous threshold; SIZE_MAX = eager only */
    const pscom_env_row_t *env; /* the plugin's own PSP_<NAME>_* rows, or NULL */

    /* Once per process. Return 0 when usable, else -1 after pscom_plugin_set_status(). */
    int (*init)(void);
    void (*destroy)(void);

    /* Connecting side: fill blob (at most PSCOM_HS_BLOB_MAX) and *len. -1: not for this peer. */
    int (*con_offer)(pscom_con_t *con, void *blob, size_t *len);
    /* Accepting side: take the offer, fill the reply. -1: decline (next plugin is tried). */
    int (*con_accept)(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                      size_t *len);
    /* Connecting side: take the reply. -1: decline. */
    int (*con_finish)(pscom_con_t *con, const void *reply, size_t reply_len);
    /* Negotiation with this plugin failed after offer/accept: release what was made. */
    void (*con_abort)(pscom_con_t *con);
    /* Both sides agreed: set the data path (pscom_con_set_transport), take ownership of fd. */
    void (*con_start)(pscom_con_t *con, int fd);
    const pscom_tag_ops_t *tag; /* optional: tag matching in the transport */
    /* Optional: the plugin's process-wide state for the SIGQUIT dump (as con_ops_t.dump), in
       lines starting with two spaces. */
    void (*dump)(FILE *out);
    /* Optional, a transport that relays connections through another process (the gateway):
       core asks it before connecting to the peer's listener at addr ("ip:port"), with
       unreachable 0, and again with 1 when a direct attempt found the peer's network
       unreachable. Return a connected stream fd that carries the handshake to the peer (the
       plugin forwards its bytes; the peer's side hands its end to pscom_relay_accept), or -1:
       not through this plugin. Such a handshake negotiates only this plugin, and a plugin with
       con_relay is never offered on a direct one. */
    int (*con_relay)(pscom_con_t *con, const char *addr, int unreachable);
    const pscom_counter_t *counters; /* optional, terminated by {NULL, NULL} */
    unsigned int flags;              /* PSCOM_PLUGIN_SELF */
} pscom_plugin_t;

/* Called by PSCOM_PLUGIN_DEFINE: a built-in plugin registers when libpscom is loaded, a
   loadable one when core dlopens its libpscom4<name>.so. Selection order follows priority,
   not the order of registration. A plugin of another PSCOM_PLUGIN_API_VERSION is refused
   (pscom_info says so). */
PSCOM_PLUGIN_API void pscom_plugin_register(const pscom_plugin_t *plugin);

/* After the plugin's descriptor: PSCOM_PLUGIN_DEFINE(pscom_plugin_shm); */
#define PSCOM_PLUGIN_DEFINE(var)                                                                   \
    __attribute__((constructor)) static void pscom_plugin_register_##var(void)                     \
    {                                                                                              \
        pscom_plugin_register(&(var));                                                             \
    }

/* ---- what core offers plugins ---- */

/* Transport state of a connection. */
PSCOM_PLUGIN_API void pscom_con_set_transport(pscom_con_t *con, const pscom_con_ops_t *ops,
                                              void *data);
PSCOM_PLUGIN_API void *pscom_con_transport_data(pscom_con_t *con);

/* From con_start: this connection's eager/rendezvous threshold instead of the plugin's (e.g.
   core's rendezvous only where the transport has none of its own). */
PSCOM_PLUGIN_API void pscom_con_set_rendezvous(pscom_con_t *con, size_t threshold);
/* From con_start, for byte-stream transports: put the data of messages of at least min_len
   bytes at a multiple of align (a power of two, at most 64) from the start of the message's
   first write, by a PAD message in front of it. The kernel copies a socket write into its
   buffer at that offset, and some CPUs copy far slower into a misaligned destination. */
PSCOM_PLUGIN_API void pscom_con_set_data_align(pscom_con_t *con, uint32_t align, size_t min_len);
/* The same where the user set no threshold for this transport (PSP_RENDEZVOUS,
   PSP_<NAME>_RENDEZVOUS): another default for connections of a kind (e.g. shm without single
   copy). */
PSCOM_PLUGIN_API void pscom_con_default_rendezvous(pscom_con_t *con, size_t threshold);
/* Copy len bytes from address remote of process pid into dst (process_vm_readv, for
   rndv_pull between processes of one node). 0, or -1 with errno. */
PSCOM_PLUGIN_API int pscom_cma_read(int pid, void *dst, uint64_t remote, size_t len);
/* The other way: len bytes from src to address remote of process pid (process_vm_writev). */
PSCOM_PLUGIN_API int pscom_cma_write(int pid, uint64_t remote, const void *src, size_t len);
/* Does con's socket hand its tagged messages to this transport? (Both ends must agree: a
   transport that offers tag matching says so in its handshake and declines a mismatch.) */
PSCOM_PLUGIN_API int pscom_con_tag_on(pscom_con_t *con);
/* From con_start on, a transport with tag matching: its handle for tag->send to this peer; NULL
   when the connection closes. */
PSCOM_PLUGIN_API void pscom_con_set_tag_ep(pscom_con_t *con, void *ep);
/* The peer side of a relayed handshake (con_relay): fd carries it, for the socket listening at
   listen_addr ("ip:port"); from (e.g. "gateway 10.0.0.5:7000") names the relay in log lines.
   0, or -1 when no socket of this process listens there (fd is then not taken). */
PSCOM_PLUGIN_API int pscom_relay_accept(const pscom_plugin_t *plugin, const char *listen_addr,
                                        int fd, const char *from);
/* From con_start: how the connection goes, for log lines ("gw 10.0.0.5:7000"; default: the
   transport's name). */
PSCOM_PLUGIN_API void pscom_con_set_via(pscom_con_t *con, const char *via);
/* Identity of the peer, known from the handshake. */
PSCOM_PLUGIN_API int pscom_con_peer_pid(pscom_con_t *con);
PSCOM_PLUGIN_API int pscom_con_peer_same_node(pscom_con_t *con);
PSCOM_PLUGIN_API const char *pscom_con_name(pscom_con_t *con); /* for log lines */
PSCOM_PLUGIN_API pscom_connection_t *pscom_con_pub(pscom_con_t *con);
/* 1 once the user closes the connection: what is queued now are its last messages (core's EOF
   among them), and the peer may be closing or gone when they arrive. */
PSCOM_PLUGIN_API int pscom_con_closing(pscom_con_t *con);
/* 1 if the application said that this node's CPUs are oversubscribed (pscom_set_oversubscribed):
   waiting for a peer may then cost it a time slice. */
PSCOM_PLUGIN_API int pscom_node_oversubscribed(void);
/* Processes of the job on this node (pscom_set_node_processes), 0 if not known. */
PSCOM_PLUGIN_API int pscom_node_processes(void);

/* Receive side: feed bytes that arrived, in order. Core parses, matches and copies. */
PSCOM_PLUGIN_API void pscom_read_feed(pscom_con_t *con, const void *buf, size_t len);
/* A user message's pscom header follows from its lengths: a message transport may leave it off
   the wire and have core rebuild it. pscom_header_user_xlen: hdr is the start of a whole
   message of len bytes (as pscom_write_get_iov gives it); its user header's length if it is
   such a message, else -1. pscom_read_feed_user: feed such a message without its header. */
PSCOM_PLUGIN_API int pscom_header_user_xlen(const void *hdr, size_t len);
PSCOM_PLUGIN_API void pscom_read_feed_user(pscom_con_t *con, const void *xheader, size_t xlen,
                                           const void *data, size_t dlen);
/* Stream transports: where the next bytes may go directly (into a matched receive buffer),
   or 0 when they should be read into the plugin's own buffer and fed. */
PSCOM_PLUGIN_API size_t pscom_read_direct_buf(pscom_con_t *con, void **buf);
/* Account len bytes that were read into the buffer pscom_read_direct_buf gave. */
PSCOM_PLUGIN_API void pscom_read_direct_done(pscom_con_t *con, size_t len);

/* Send side: the unsent rest of the message at the head of the send queue as up to 3 iov
   entries. Returns the number of entries (0: nothing to send). */
PSCOM_PLUGIN_API int pscom_write_get_iov(pscom_con_t *con, struct iovec iov[3]);
/* len bytes of what pscom_write_get_iov returned have been sent (or copied away). */
PSCOM_PLUGIN_API void pscom_write_done(pscom_con_t *con, size_t len);
/* The transport took the whole message at the head of the send queue but still reads its
   buffer (zero-copy): the message leaves the send queue, the next one may start; complete it
   with pscom_write_release once the buffer is free (failed: with an error). A closed
   connection fails held messages itself: no release after ops->close. */
PSCOM_PLUGIN_API pscom_req_t *pscom_write_hold(pscom_con_t *con);
PSCOM_PLUGIN_API void pscom_write_release(pscom_con_t *con, pscom_req_t *req, int failed);
/* Is anything queued for sending? */
PSCOM_PLUGIN_API int pscom_write_pending(pscom_con_t *con);

/* The transport broke (peer died, read error, ...). Core fails the connection's requests,
   calls the socket's error callback once and then ops->close. Orderly EOFs are recognised:
   if the peer's EOF message was already received this is silent. */
PSCOM_PLUGIN_API void pscom_con_transport_failed(pscom_con_t *con, pscom_op_t op, pscom_err_t err,
                                                 const char *why);

/* ---- progress: pollers (busy polled) and file descriptors (epoll) ---- */

typedef struct pscom_poller pscom_poller_t;
struct pscom_poller {
    pscom_poller_t *next, *prev;
    /* Returns nonzero if it made progress. */
    int (*poll)(pscom_poller_t *poller);
    /* About to block: arm a wakeup (e.g. doorbell) and return nonzero if there is work after
       all (then the caller does not block). May be NULL. */
    int (*prepare_block)(pscom_poller_t *poller);
    /* Woken up or not: disarm. May be NULL. */
    void (*end_block)(pscom_poller_t *poller);
};
PSCOM_PLUGIN_API void pscom_poller_add(pscom_poller_t *poller);
/* From prepare_block: block at most this long (e.g. while waiting for ring space). */
PSCOM_PLUGIN_API void pscom_progress_block_hint(int timeout_ms);
PSCOM_PLUGIN_API void pscom_poller_del(pscom_poller_t *poller);

typedef struct pscom_ufd pscom_ufd_t;
struct pscom_ufd {
    int fd;
    uint32_t events; /* EPOLLIN / EPOLLOUT */
    void (*handler)(pscom_ufd_t *ufd, uint32_t revents);
    void *priv;
};
PSCOM_PLUGIN_API int pscom_ufd_add(pscom_ufd_t *ufd);
PSCOM_PLUGIN_API void pscom_ufd_mod(pscom_ufd_t *ufd, uint32_t events);
PSCOM_PLUGIN_API void pscom_ufd_del(pscom_ufd_t *ufd);
/* fds that carry data (tcp streams) are polled every round; others now and then. */
PSCOM_PLUGIN_API void pscom_reactor_busy_fd(int delta);

/* ---- environment and logging ---- */

/* A plugin's status line for pscom_info ("disabled by PSP_UCP=0", "libucp.so.0 not found"). */
PSCOM_PLUGIN_API void pscom_plugin_set_status(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

extern PSCOM_PLUGIN_API int pscom_debug_level;
PSCOM_PLUGIN_API void pscom_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define PSCOM_LOG(level, ...)                                                                      \
    do {                                                                                           \
        if (pscom_debug_level >= (level))                                                          \
            pscom_log((level), __VA_ARGS__);                                                       \
    } while (0)

/* Counters shown by PSP_DEBUG_STATS and PSP_SIGQUIT. */
typedef struct pscom_stats {
    uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv;
    uint64_t eager_unexpected, rndv_sent, rndv_recv, rndv_pull, rndv_sw_fallback, rndv_gpu;
    uint64_t cons_opened, cons_failed, progress_blocks, garbage_cons;
    /* flow control: bytes held by unexpected eager messages now and at most (their cost, see
       pscom_fc.c), sends that went rendezvous for want of credit, grants sent, such rendezvous
       messages whose data we fetched before a receive took them */
    uint64_t unexp_bytes, unexp_bytes_max, fc_rndv, fc_grants, fc_ahead;
} pscom_stats_t; /* a plugin's own counters: pscom_plugin_t.counters */
extern PSCOM_PLUGIN_API pscom_stats_t pscom_stats;

#endif /* PSCOM_PLUGIN_H_INCLUDED */
