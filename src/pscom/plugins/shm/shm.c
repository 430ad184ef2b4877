/*
 * shm transport for peers on the same node: lock-free single-producer/single-consumer rings
 * for eager messages, a pair per connection, many pairs in one SysV segment (shm_arena.h);
 * single-copy rendezvous with process_vm_readv (ring copies when the kernel refuses).
 *
 * The handshake's TCP socket stays open: it is the doorbell that wakes a peer blocked in
 * epoll_wait, and its EOF tells us that the peer is gone.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "pscom_plugin.h"
#include "shm_arena.h"
#include "shm_fence.h"
#include "shm_offer.h"

static struct {
    unsigned nslots, slot_size, per_arena;
    int nslots_set; /* PSP_SHM_SLOTS given: no scaling by the node's processes */
    int cma;
    size_t split;
    unsigned prefetch;
} cfg;

static const pscom_env_row_t shm_env[] = {
    {"PSP_SHM_SLOTS", "32",
     "Size of a shm connection's ring per direction, in messages of the largest size "
     "(PSP_SHM_SLOT_SIZE); smaller messages are packed, so it holds more of them (about 5000 "
     "of 8 bytes). Unset, a node with more than 17 processes of the job gets smaller rings, "
     "down to 4 (32 * 16 / the other processes).",
     PSCOM_ENV_UINT, &cfg.nslots, 2, 1024},
    /* 8 KiB and 128 bytes: an 8 KiB message with its headers (the ring's, pscom's, an MPI
       xheader) in one record, not two (MPI ping-pong of 8 KiB 0.86-0.97 -> 0.77-0.82 us) */
    {"PSP_SHM_SLOT_SIZE", "8320",
     "Largest message piece in a shm ring, in bytes with its 8-byte header (multiple of 64): "
     "longer messages that go through the ring are cut into pieces.",
     PSCOM_ENV_UINT, &cfg.slot_size, 256, 1 << 20},
    {"PSP_SHM_ARENA", "32",
     "Connections whose rings share one SysV segment: a process needs ceil(connections it "
     "opened / this) segments.",
     PSCOM_ENV_UINT, &cfg.per_arena, 1, SHM_ARENA_MAX_PAIRS},
    {"PSP_SHM_PREFETCH", "4",
     "While waiting, prefetch the lines after the next message's first one, as many as the "
     "connection's last message used, if that was at most this many (0: off). Without it the "
     "data lines of a 40-400 byte message cross between the cores only after the first line "
     "(measured: 64-256 B ping-pong 0.32-0.48 -> 0.21-0.31 us; longer messages got slower: "
     "the receiver took lines away while the sender still wrote them).",
     PSCOM_ENV_UINT, &cfg.prefetch, 0, 64},
    {"PSP_SHM_CMA", "1", "Single-copy rendezvous with process_vm_readv (0: copy via the ring).",
     PSCOM_ENV_BOOL, &cfg.cma, 0, 0},
    /* 128k (two 64 KiB chunks) measured: 256 KiB bandwidth 13 -> 19 GB/s, latency 20 -> 16 us
       with 2 ranks; with more ranks than cores the helper competes for the CPU instead */
    {"PSP_SHM_SPLIT", "128k",
     "Rendezvous messages of at least this size are copied by both sides at once, each a "
     "part (0: the receiver copies alone).",
     PSCOM_ENV_SIZE, &cfg.split, 0, 0},
    {NULL, NULL, NULL, 0, NULL, 0, 0},
};

/* On a node with more processes than CPUs, SHM_REWIND bytes into a ring the producer goes back
   to its start as soon as the consumer is done with what lies there (asked again every
   SHM_REWIND_RETRY bytes): a connection that never has much in flight then keeps to the first
   lines of its ring, which stay in the caches of the CPUs its two processes share. Going round
   the whole ring (266 KiB by default), 8 ranks on 2 CPUs, each process's rings of 7 peers took
   3.7 MiB and most messages a line from memory: Barrier 43-48 -> 34-41 us, Allreduce 8 B 45-64
   -> 42-45, Alltoall 8 B 40-49 -> 27-39 (5 interleaved rounds). Not with a CPU per process:
   there the line comes from the peer's cache either way, and going back only made the producer
   fetch lines the consumer had just read (2 ranks, streams of 1-4 KiB 0.45-1.6 -> 0.6-2.0 us per
   message). */
#define SHM_REWIND       4096u
#define SHM_REWIND_RETRY 1024u

typedef struct shm_con shm_con_t;
struct shm_con {
    list_head_t link; /* in active (first: list_entry costs nothing) */
    pscom_con_t *con;
    shm_arena_t *arena; /* holds our pair */
    shm_ring_t *out, *in;
    uint64_t wpos, rpos; /* bytes written to out / read from in, in all */
    uint32_t woff, roff; /* the same as offsets into the rings */
    uint32_t wseq, rseq; /* messages written to out / read from in (their numbers) */
    uint64_t seen;       /* out->consumed as last read: bytes up to seen + ring_bytes free */
    uint64_t zhint;      /* where zero_ahead wrote a zero header (0: nowhere yet) */
    uint32_t rewind_at;  /* woff from which out_rec tries to go back to the ring's start */
    uint32_t rewind;     /* SHM_REWIND, or UINT32_MAX: never (a CPU per process) */
    int reading;         /* nesting of shm_read: only the outermost publishes rpos */
    uint32_t ring_bytes, payload;
    uint32_t pf_lines;   /* lines after the first that the next message likely fills */
    uint64_t peer_probe; /* the peer's cma_probe */
    int peer_waits;      /* we read a message since our last send: the peer may wait for ours */
    int pingpong;        /* so for the record being written: see rec_fill and out_publish */
    pscom_ufd_t ufd;     /* doorbell and peer-death detector */
    int busy, dead, cma_ok;
    int light; /* publish without a fence: the consumer fences before it sleeps (shm_fence.h) */
};

/* Read by the peer at connection start: does single copy (process_vm_readv) work between us?
   (Denied e.g. under Yama ptrace_scope 1, where ranks are siblings.) */
static const uint64_t cma_probe = 0x65626f7270616d63ull;

/* Rendezvous threshold: from 8 KiB single copy beats the ring where process_vm_readv is cheap
   (16 KiB ping-pong 2.31 -> 1.39 us; 4 KiB was slower). Where one call costs SHM_CMA_SLOW_NS or
   more (AMD EPYC guests: 2.6 us even for 64 bytes) the ring is faster up to 8 KiB. From 16 KiB
   the ring is bimodal there, from one job to the next and in phases of the host: a 32 KiB
   ping-pong took 2.5-4 us in some runs and 9.5-12.5 in others (bibw 16 KiB 1.0-1.4 or 4.0-4.6
   us per message), single copy a steady 6.5-9 (2.3-2.7), Open MPI 7.5 (2.4-2.8). Single copy
   from 16 KiB is never behind Open MPI there; the ring in its slow phase is, and that phase
   held 7 of 8 runs in one hour of measuring. Without single copy a rendezvous only adds a round
   trip: from SHM_RNDV_NOCMA then. On a node with more processes than CPUs a rendezvous send waits
   for the receiver to be scheduled, but the CPUs' time is what is short there, and single copy
   halves the copying: from 32 KiB (4 and 8 ranks on 2 CPUs, eager up to 128 KiB -> rendezvous, 64
   KiB: Alltoall 125-218 -> 58-97 us and 742-841 -> 439-474 us, Bcast 4 ranks 69-143 -> 23-29 us,
   Allgather 8 ranks 583-707 -> 412-472 us. At 16 KiB Alltoall and Allgather gained as much, Bcast
   of 8 ranks and Allreduce lost 15-50 %: those stay eager). */
#define SHM_RNDV          8192
#define SHM_RNDV_SLOW_CMA 16384
#define SHM_CMA_SLOW_NS   1000
#define SHM_RNDV_NOCMA    65536
#define SHM_RNDV_OVERSUB  32768

static list_head_t active = LIST_HEAD_INIT(active); /* started connections */
static int n_active;
/* Prefetching while idle only with few peers: with many, the lines of all their next messages
   would crowd the L1 cache out. */
#define PREFETCH_CONS_MAX 4
static unsigned list_gen;
static uint64_t shm_ring_full, shm_doorbells, shm_rewinds; /* PSP_DEBUG_STATS: shm_counters */
static pscom_poller_t poller;
static int poller_on;
static int fence_ok; /* registered for the consumers' fences; we fence before we sleep */

static shm_con_t *shm_con_new(pscom_con_t *con, shm_pair_t *pair, shm_arena_t *arena, int creator)
{
    shm_con_t *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return NULL;
    sc->con = con;
    sc->arena = arena;
    sc->ring_bytes = shm_ring_bytes(pair->nslots, pair->slot_size);
    sc->rewind = pscom_node_oversubscribed() ? SHM_REWIND : UINT32_MAX;
    sc->rewind_at = sc->rewind;
    sc->payload = pair->slot_size - (uint32_t)sizeof(shm_rec_t);
    sc->out = shm_pair_ring(pair, creator ? 0 : 1);
    sc->in = shm_pair_ring(pair, creator ? 1 : 0);
    sc->cma_ok = cfg.cma;
    sc->in->fences = (uint32_t)fence_ok; /* read by the producer once the handshake is done */
    list_init(&sc->link);
    return sc;
}

static void shm_con_free(shm_con_t *sc)
{
    shm_arena_put(sc->arena);
    free(sc);
}

static void ring_bell(shm_con_t *sc)
{
    shm_doorbells++;
    if (send(sc->ufd.fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
        PSCOM_LOG(3, "shm doorbell to %s: %s", pscom_con_name(sc->con), strerror(errno));
}

/* ---- send ---- */

static __attribute__((noinline)) uint32_t rewind_skip(shm_con_t *sc, uint32_t need)
{
    uint32_t skip = sc->ring_bytes - sc->woff;
    sc->seen = atomic_load_explicit(&sc->out->consumed, memory_order_acquire);
    if (sc->wpos + skip + need - sc->seen <= sc->ring_bytes) {
        shm_rewinds++;
        return skip;
    }
    sc->rewind_at = sc->woff + SHM_REWIND_RETRY;
    return 0;
}

/* Room in out for a record of len bytes and the zero header behind it, or NULL while the
   consumer has not read enough. Where the record would cross the end, or may go back to the
   start (rewind_skip), the rest is skipped with a wrap mark first. */
static inline shm_rec_t *out_rec(shm_con_t *sc, uint32_t len)
{
    sc->pingpong = sc->peer_waits;
    sc->peer_waits = 0;
    uint32_t need = shm_rec_size(len) + (uint32_t)sizeof(shm_rec_t) + (sc->pingpong ? 56 : 0);
    uint32_t skip = 0;
    if (sc->woff + need > sc->ring_bytes)
        skip = sc->ring_bytes - sc->woff;
    else if (unlikely(sc->woff >= sc->rewind_at))
        skip = rewind_skip(sc, need);
    if (sc->wpos + skip + need - sc->seen > sc->ring_bytes) {
        /* acquire: the consumer's reads of those bytes are done before we overwrite them */
        sc->seen = atomic_load_explicit(&sc->out->consumed, memory_order_acquire);
        if (sc->wpos + skip + need - sc->seen > sc->ring_bytes) {
            sc->peer_waits = sc->pingpong; /* not written */
            return NULL;
        }
    }
    if (skip) {
        shm_ring_wrap(sc->out, sc->woff, sc->wseq + 1);
        sc->wpos += skip;
        sc->woff = 0;
        sc->rewind_at = sc->rewind;
    }
    return shm_ring_rec(sc->out, sc->woff);
}

/* After a publish to a peer that waits (the record ends a line), zero where the header behind
   a next record of the same length goes: it is then there already. Written on the way to that
   record's publish, in a line of its own, it makes the publish wait for that line to come from
   the consumer's cache (0 B ping-pong 0.28 -> 0.44 us, 256 B 0.44 -> 0.60 us). In a stream the
   header behind a record mostly shares the record's last line. Only room the consumer is done
   with. */
static void zero_ahead(shm_con_t *sc, uint32_t size)
{
    uint64_t at = sc->wpos + size;
    uint32_t off = sc->woff + size;
    if (off + sizeof(shm_rec_t) <= sc->ring_bytes &&
        at + sizeof(shm_rec_t) <= sc->seen + sc->ring_bytes) {
        atomic_store_explicit(&shm_ring_rec(sc->out, off)->word, 0, memory_order_relaxed);
        sc->zhint = at;
    }
}

/* Publish the record out_rec returned, holding len bytes (what: SHM_REC_USER or 0). To a peer that
   waits (ping-pong), the next record starts on a new line: each message then takes the lines it
   needs and no more, as the receiver fetches them one by one after the header (in a stream records
   are packed). */
static inline void out_publish(shm_con_t *sc, shm_rec_t *rec, uint32_t len, uint32_t what)
{
    uint32_t size = shm_rec_size(len);
    len |= what;
    if (sc->pingpong) {
        uint32_t aligned = ((sc->woff + size + 63) & ~63u) - sc->woff;
        if (sc->woff + aligned + sizeof(shm_rec_t) <= sc->ring_bytes) {
            size = aligned;
            len |= SHM_REC_ALIGN;
        }
    }
    uint64_t end = sc->wpos + size;
    if (end != sc->zhint)
        atomic_store_explicit(&shm_ring_rec(sc->out, sc->woff + size)->word, 0,
                              memory_order_relaxed);
    /* ordered before the recv_sleeping check below (Dekker with the consumer's prepare_block):
       by the consumer's fence where it makes one (shm_fence.h), else by seq_cst. A release in
       both cases, for the payload and the zero header behind. */
    if (sc->light) {
        atomic_store_explicit(&rec->word, shm_rec_word(++sc->wseq, len), memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store(&rec->word, shm_rec_word(++sc->wseq, len));
    }
    sc->wpos = end;
    sc->woff += size;
    if (atomic_load(&sc->out->recv_sleeping) && atomic_exchange(&sc->out->recv_sleeping, 0))
        ring_bell(sc);
    if (len & SHM_REC_ALIGN)
        zero_ahead(sc, size);
}

/* Is there a record (or wrap mark) at the next header of in? Its contents are checked by
   shm_read. */
static inline int in_ready(const shm_con_t *sc, memory_order mo)
{
    return atomic_load_explicit(&shm_ring_rec(sc->in, sc->roff)->word, mo) != 0;
}

/* Copy the message into the record. To a peer that waits for it, the bytes in the header's
   cache line go last, with the header: the receiver polls that line. Written in one go at the
   end, the line crosses to the sender's core once; written first, the polling receiver takes it
   away and the publish waits for it to come back (a 1 KiB ping-pong took 15 % longer). In a
   stream, where the receiver reads older records, the plain order is faster (64 B: 760 instead
   of 640 MB/s). */
static inline void rec_fill(const shm_con_t *sc, shm_rec_t *rec, const struct iovec *iov, int n,
                            size_t len)
{
    size_t off = 0;
    /* payload bytes in the header's line: 0 where the header ends its line */
    size_t head_len = (64 - ((sc->woff + sizeof(shm_rec_t)) & 63)) & 63;
    if (len <= head_len || !sc->pingpong) {
        for (int i = 0; i < n; i++) {
            pscom_memcpy(rec->data + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        return;
    }
    unsigned char head[64];
    for (int i = 0; i < n; i++) {
        const unsigned char *p = iov[i].iov_base;
        size_t l = iov[i].iov_len;
        if (off < head_len) {
            size_t h = l < head_len - off ? l : head_len - off;
            memcpy(head + off, p, h);
            p += h;
            l -= h;
            off += h;
        }
        if (l)
            pscom_memcpy(rec->data + off, p, l);
        off += l;
    }
    memcpy(rec->data, head, head_len);
}

static void shm_write(shm_con_t *sc)
{
    struct iovec iov[3];
    int n;
    while ((n = pscom_write_get_iov(sc->con, iov)) > 0) {
        uint32_t total = 0;
        int k = 0;
        for (; k < n && total < sc->payload; k++) { /* what fits: a large message in pieces */
            if (iov[k].iov_len > sc->payload - total)
                iov[k].iov_len = sc->payload - total;
            total += (uint32_t)iov[k].iov_len;
        }
        shm_rec_t *rec = out_rec(sc, total);
        if (!rec) {
            shm_ring_full++;
            return; /* the poller retries; prepare_block asks for a wakeup */
        }
        rec_fill(sc, rec, iov, k, total);
        out_publish(sc, rec, total, 0);
        pscom_write_done(sc->con, total);
        if (sc->dead)
            return;
    }
}

static int shm_write_now(pscom_con_t *con, const struct iovec *iov, int n, size_t len)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    if (!sc || sc->dead || len > sc->payload)
        return 0;
    shm_rec_t *rec = out_rec(sc, (uint32_t)len);
    if (!rec)
        return 0;
    rec_fill(sc, rec, iov, n, len);
    out_publish(sc, rec, (uint32_t)len, 0);
    return 1;
}

/* A whole user message without pscom's header (SHM_REC_USER) */
static int shm_write_user_now(pscom_con_t *con, const void *xheader, size_t xlen, const void *data,
                              size_t dlen)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    size_t len = xlen + dlen;
    if (!sc || sc->dead || len > sc->payload || xlen > SHM_REC_XLEN_MAX || !len)
        return 0;
    shm_rec_t *rec = out_rec(sc, (uint32_t)len);
    if (!rec)
        return 0;
    const struct iovec iov[2] = {{(void *)(uintptr_t)xheader, xlen},
                                 {(void *)(uintptr_t)data, dlen}};
    rec_fill(sc, rec, iov, dlen ? 2 : 1, len);
    out_publish(sc, rec, (uint32_t)len, SHM_REC_USER | (uint32_t)xlen << 20);
    return 1;
}

static void shm_write_start(pscom_con_t *con)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    sc->busy++;
    shm_write(sc);
    if (--sc->busy == 0 && sc->dead)
        shm_con_free(sc);
}

/* ---- receive ---- */

static void ring_corrupt(shm_con_t *sc, const char *what, uint64_t word)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "corrupt shm ring: %s (message %u, length %u, at %u)", what,
             (unsigned)(word >> 32), (unsigned)word, sc->roff);
    pscom_con_transport_failed(sc->con, PSCOM_OP_READ, PSCOM_ERR_PROTOCOL, msg);
}

/* Read what is in the ring. Returns nonzero if anything was read. */
static int shm_read(shm_con_t *sc, int max)
{
    int k = 0;
    sc->reading++;
    while (k < max && !sc->dead) {
        shm_rec_t *rec = shm_ring_rec(sc->in, sc->roff);
        uint64_t word = atomic_load_explicit(&rec->word, memory_order_acquire);
        if (!word)
            break; /* nothing there yet (in_ready) */
        uint32_t what = (uint32_t)word, len = what & SHM_REC_LEN;
        if ((uint32_t)(word >> 32) != sc->rseq + 1) {
            ring_corrupt(sc, "unexpected message number", word);
            break;
        }
        if (what == SHM_REC_WRAP) {
            if (!sc->roff) { /* would wrap to itself */
                ring_corrupt(sc, "wrap mark at the start", word);
                break;
            }
            sc->rpos += sc->ring_bytes - sc->roff;
            sc->roff = 0;
            continue;
        }
        uint32_t size = shm_rec_span(sc->roff, what), xlen = SHM_REC_XLEN(what);
        if (len > sc->payload || !len || sc->roff + size + sizeof(shm_rec_t) > sc->ring_bytes ||
            (what & SHM_REC_USER ? xlen > len : xlen)) {
            ring_corrupt(sc, "bad length", word);
            break;
        }
        /* advance first: callbacks that make progress must not read this record again */
        sc->rpos += size;
        sc->roff += size;
        sc->rseq++;
        k++;
        uint32_t extra = (uint32_t)(((uintptr_t)rec->data + len - 1) / 64 - (uintptr_t)rec / 64);
        sc->pf_lines = extra <= cfg.prefetch && n_active <= PREFETCH_CONS_MAX ? extra : 0;
        if (what & SHM_REC_USER)
            pscom_read_feed_user(sc->con, rec->data, xlen, rec->data + xlen, len - xlen);
        else
            pscom_read_feed(sc->con, rec->data, len);
    }
    if (k)
        sc->peer_waits = 1;
    /* free what was read, once the outermost read is done with its record */
    if (--sc->reading == 0 && k) {
        atomic_store_explicit(&sc->in->consumed, sc->rpos, memory_order_release);
        if (atomic_load_explicit(&sc->in->send_waiting, memory_order_relaxed) &&
            atomic_exchange(&sc->in->send_waiting, 0))
            ring_bell(sc);
    }
    return k;
}

static int shm_help(shm_con_t *sc);

static int shm_poll(pscom_poller_t *p)
{
    (void)p;
    int made = 0;
    unsigned gen = list_gen;
    for (list_head_t *l = active.next, *next; l != &active; l = next) {
        shm_con_t *sc = list_entry(l, shm_con_t, link);
        next = l->next;
        /* the idle case first: nothing in the ring, nothing to send, no copy to help with.
           A waiting MPI call loops through here, and on average half a loop is added to the
           latency of every message. */
        if (!in_ready(sc, memory_order_relaxed) && !pscom_write_pending(sc->con) &&
            !(sc->cma_ok && shm_copy_pending(&sc->out->job))) {
            const char *next = (const char *)((uintptr_t)shm_ring_rec(sc->in, sc->roff) & ~63ul);
            for (uint32_t i = 1; i <= sc->pf_lines; i++)
                __builtin_prefetch(next + 64 * i);
            continue;
        }
        sc->busy++;
        made |= shm_read(sc, 8);
        if (!sc->dead && pscom_write_pending(sc->con))
            shm_write(sc);
        if (!sc->dead && sc->cma_ok && shm_copy_pending(&sc->out->job))
            made |= shm_help(sc);
        if (--sc->busy == 0 && sc->dead)
            shm_con_free(sc);
        if (gen != list_gen)
            break; /* the list changed under us */
    }
    return made;
}

static int shm_prepare_block(pscom_poller_t *p)
{
    (void)p;
    int work = 0;
    list_head_t *l;
    list_for_each(l, &active)
    {
        shm_con_t *sc = list_entry(l, shm_con_t, link);
        atomic_store(&sc->in->recv_sleeping, 1);
    }
    /* for the producers that publish without a fence; without it we must not sleep */
    if (fence_ok && !list_empty(&active) && shm_fence_heavy() != 0) {
        static int told;
        if (!told++)
            pscom_log(1, "warning: shm: membarrier failed (%s): waiting without sleeping",
                      strerror(errno));
        return 1;
    }
    list_for_each(l, &active)
    {
        shm_con_t *sc = list_entry(l, shm_con_t, link);
        if (in_ready(sc, memory_order_seq_cst))
            work = 1;
        /* waiting for ring space: keep polling. The consumer's wakeup for it is best effort
           (no fence on its hot path), and a lost one costs far more than the spin. */
        if (pscom_write_pending(sc->con))
            work = 1;
    }
    return work;
}

static void shm_end_block(pscom_poller_t *p)
{
    (void)p;
    list_head_t *l;
    list_for_each(l, &active)
    {
        shm_con_t *sc = list_entry(l, shm_con_t, link);
        atomic_store_explicit(&sc->in->recv_sleeping, 0, memory_order_relaxed);
        atomic_store_explicit(&sc->out->send_waiting, 0, memory_order_relaxed);
    }
}

static void doorbell_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    shm_con_t *sc = ufd->priv;
    char buf[64];
    (void)revents;
    ssize_t n = recv(ufd->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return; /* a wakeup; the poller reads the ring */
    /* the peer is gone: take what it left in the ring first (its EOF may be there) */
    sc->busy++;
    while (!sc->dead && shm_read(sc, 1 << 30))
        ;
    if (!sc->dead)
        pscom_con_transport_failed(sc->con, PSCOM_OP_READ, PSCOM_ERR_IOERROR,
                                   n == 0 ? "peer process exited" : strerror(errno));
    if (--sc->busy == 0 && sc->dead)
        shm_con_free(sc);
}

/* ---- rendezvous ---- */

static int shm_rndv_pull(pscom_con_t *con, void *dst, uint64_t remote, size_t len)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    if (!sc->cma_ok)
        return -1;
    if (shm_copy_pull(&sc->in->job, &sc->out->job, pscom_con_peer_pid(con), dst, remote, len,
                      cfg.split) == 0)
        return 0;
    if (errno == EPERM || errno == ENOSYS || errno == EACCES) {
        sc->cma_ok = 0;
        PSCOM_LOG(2, "single-copy from %s not permitted (%s); copying through the ring",
                  pscom_con_name(con), strerror(errno));
    }
    return -1;
}

/* The peer pulls a large message of ours: push a part of it (see shm_copy.h). */
static int shm_help(shm_con_t *sc)
{
    int rc = shm_copy_help(&sc->out->job, pscom_con_peer_pid(sc->con));
    if (rc < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES)) {
        sc->cma_ok = 0;
        PSCOM_LOG(2, "single-copy to %s not permitted (%s)", pscom_con_name(sc->con),
                  strerror(errno));
    }
    return rc != 0;
}

/* ---- connection life ---- */

static void shm_close(pscom_con_t *con)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    if (!sc)
        return;
    if (list_linked(&sc->link)) {
        list_del(&sc->link);
        n_active--;
        list_gen++;
        pscom_ufd_del(&sc->ufd);
        close(sc->ufd.fd);
    }
    if (list_empty(&active) && poller_on) {
        pscom_poller_del(&poller);
        poller_on = 0;
    }
    pscom_con_set_transport(con, NULL, NULL);
    sc->dead = 1;
    if (!sc->busy)
        shm_con_free(sc);
}

static const pscom_con_ops_t shm_ops = {
    .write_start = shm_write_start,
    .write_now = shm_write_now,
    .write_user_now = shm_write_user_now,
    .close = shm_close,
    .rndv_pull = shm_rndv_pull,
};

/* Slots of a new connection's rings. A process of a node with many processes may open a
   connection to each of them (Alltoall), and every slot costs memory and cache lines: an Alltoall
   of 128 ranks on one node touched 2.3 GB of rings and took 68 ms per call with 32 slots, 0.53
   GB and 28 ms with 8, 0.27 GB and 17 ms with 4. So beyond SHM_FULL_RING_PEERS other processes
   the slots shrink in proportion, to SHM_MIN_SLOTS. */
#define SHM_FULL_RING_PEERS 16
#define SHM_MIN_SLOTS       4
static unsigned ring_slots(void)
{
    int peers = pscom_node_processes() - 1;
    if (cfg.nslots_set || peers <= SHM_FULL_RING_PEERS)
        return cfg.nslots;
    unsigned n = cfg.nslots * SHM_FULL_RING_PEERS / (unsigned)peers; /* cfg.nslots: the default */
    return n > SHM_MIN_SLOTS ? n : SHM_MIN_SLOTS;
}

static int shm_offer(pscom_con_t *con, void *blob, size_t *len)
{
    if (!pscom_con_peer_same_node(con))
        return -1;
    shm_arena_t *arena;
    shm_pair_ref_t ref;
    shm_pair_t *pair = shm_arena_new_pair(ring_slots(), cfg.slot_size, cfg.per_arena, &arena, &ref);
    if (!pair) {
        PSCOM_LOG(2, "shm segment for %s: %s", pscom_con_name(con), strerror(errno));
        return -1;
    }
    shm_con_t *sc = shm_con_new(con, pair, arena, 1);
    if (!sc) {
        shm_arena_put(arena);
        return -1;
    }
    shm_offer_t o = {.magic = SHM_OFFER_MAGIC,
                     .version = SHM_OFFER_VERSION,
                     .shmid = ref.shmid,
                     .index = ref.index,
                     .npairs = ref.npairs,
                     .nslots = ref.nslots,
                     .slot_size = ref.slot_size,
                     .arena_cookie = ref.arena_cookie,
                     .pair_cookie = ref.pair_cookie,
                     .probe = (uint64_t)(uintptr_t)&cma_probe};
    memcpy(blob, &o, sizeof(o));
    *len = sizeof(o);
    pscom_con_set_transport(con, NULL, sc); /* pending until start or abort */
    return 0;
}

static int shm_accept(pscom_con_t *con, const void *offer, size_t offer_len, void *blob,
                      size_t *len)
{
    shm_offer_t o;
    const char *why = NULL;
    (void)blob;
    *len = 0;
    if (!pscom_con_peer_same_node(con))
        return -1;
    if (offer_len != sizeof(o)) {
        why = "offer of unknown length (another version?)";
    } else {
        memcpy(&o, offer, sizeof(o));
        if (o.magic != SHM_OFFER_MAGIC || o.version != SHM_OFFER_VERSION)
            why = "offer of another version";
        else if (o.nslots < 2 || o.nslots > 1024 || o.slot_size < 256 || o.slot_size > (1u << 20) ||
                 o.slot_size % 64)
            why = "bad ring geometry";
    }
    shm_arena_t *arena = NULL;
    shm_pair_t *pair = NULL;
    if (!why) {
        shm_pair_ref_t ref = {.shmid = o.shmid,
                              .index = o.index,
                              .npairs = o.npairs,
                              .nslots = o.nslots,
                              .slot_size = o.slot_size,
                              .arena_cookie = o.arena_cookie,
                              .pair_cookie = o.pair_cookie};
        pair = shm_arena_claim_pair(&ref, &arena, &why);
    }
    if (!pair) {
        PSCOM_LOG(2, "shm offer of %s: %s", pscom_con_name(con), why);
        return -1;
    }
    shm_con_t *sc = shm_con_new(con, pair, arena, 0);
    if (!sc) {
        shm_arena_put(arena);
        return -1;
    }
    sc->peer_probe = o.probe;
    uint64_t probe = (uint64_t)(uintptr_t)&cma_probe;
    memcpy(blob, &probe, sizeof(probe));
    *len = sizeof(probe);
    pscom_con_set_transport(con, NULL, sc);
    return 0;
}

static int shm_finish(pscom_con_t *con, const void *reply, size_t reply_len)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    if (!sc || reply_len != sizeof(sc->peer_probe))
        return -1;
    memcpy(&sc->peer_probe, reply, sizeof(sc->peer_probe));
    return 0;
}

/* Single copy to and from this peer? If not, the ring carries everything. */
static int cma_works(shm_con_t *sc)
{
    uint64_t v = 0;
    if (sc->cma_ok &&
        pscom_cma_read(pscom_con_peer_pid(sc->con), &v, sc->peer_probe, sizeof(v)) == 0 &&
        v == cma_probe)
        return 1;
    if (sc->cma_ok)
        PSCOM_LOG(2, "single copy with %s not permitted (%s); large messages go through the ring",
                  pscom_con_name(sc->con), v ? "probe mismatch" : strerror(errno));
    sc->cma_ok = 0;
    return 0;
}

/* The fixed cost of a process_vm_readv here, in ns: the fastest of a few 8-byte reads of our
   own memory (the first call of a process is the slowest), measured once. */
static uint64_t cma_call_ns(void)
{
    static uint64_t ns;
    if (ns)
        return ns;
    static const uint64_t src = 1;
    uint64_t dst;
    ns = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t t0 = pscom_now_ns();
        if (pscom_cma_read(getpid(), &dst, (uint64_t)(uintptr_t)&src, sizeof(dst)) != 0)
            break;
        uint64_t t = pscom_now_ns() - t0;
        if (t < ns)
            ns = t ? t : 1;
    }
    if (ns != UINT64_MAX)
        PSCOM_LOG(2, "shm: a single-copy call takes %llu ns here: rendezvous from %u bytes",
                  (unsigned long long)ns, ns >= SHM_CMA_SLOW_NS ? SHM_RNDV_SLOW_CMA : SHM_RNDV);
    return ns;
}

/* The connection's rendezvous threshold where the user set none: SHM_RNDV (the plugin's
   default), SHM_RNDV_NOCMA without single copy (also on an oversubscribed node: 64 KiB
   collectives of 4 and 8 ranks on 2 CPUs were level with eager or faster, Alltoall of 4 ranks
   112-167 -> 92-100 us), SHM_RNDV_OVERSUB on an oversubscribed node, SHM_RNDV_SLOW_CMA where
   single copy is slow to start. */
static void set_rendezvous(shm_con_t *sc)
{
    if (!cma_works(sc))
        pscom_con_default_rendezvous(sc->con, SHM_RNDV_NOCMA);
    else if (pscom_node_oversubscribed())
        pscom_con_default_rendezvous(sc->con, SHM_RNDV_OVERSUB);
    else if (cma_call_ns() >= SHM_CMA_SLOW_NS)
        pscom_con_default_rendezvous(sc->con, SHM_RNDV_SLOW_CMA);
}

static void shm_abort(pscom_con_t *con)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    pscom_con_set_transport(con, NULL, NULL);
    if (sc)
        shm_con_free(sc);
}

static void shm_start(pscom_con_t *con, int fd)
{
    shm_con_t *sc = pscom_con_transport_data(con);
    sc->ufd = (pscom_ufd_t){.fd = fd, .events = EPOLLIN, .handler = doorbell_handler, .priv = sc};
    pscom_ufd_add(&sc->ufd);
    list_add_tail(&sc->link, &active);
    n_active++;
    list_gen++;
    pscom_con_set_transport(con, &shm_ops, sc);
    sc->light = fence_ok && sc->out->fences;
    set_rendezvous(sc);
    if (!poller_on) {
        poller = (pscom_poller_t){
            .poll = shm_poll, .prepare_block = shm_prepare_block, .end_block = shm_end_block};
        pscom_poller_add(&poller);
        poller_on = 1;
    }
}

static void shm_destroy(void)
{
    shm_arena_release_idle();
}

static int shm_init(void)
{
    cfg.nslots_set = getenv("PSP_SHM_SLOTS") != NULL;
    if (cfg.slot_size % 64) {
        cfg.slot_size = (cfg.slot_size + 63) & ~63u;
        pscom_log(1, "warning: PSP_SHM_SLOT_SIZE rounded up to %u", cfg.slot_size);
    }
    fence_ok = shm_fence_init();
    PSCOM_LOG(2, "shm: publish %s", fence_ok ? "without a fence (membarrier)" : "with a fence");
    return 0;
}

static const pscom_counter_t shm_counters[] = {{"ring full", &shm_ring_full},
                                               {"doorbells", &shm_doorbells},
                                               {"rewinds", &shm_rewinds},
                                               {NULL, NULL}};

static const pscom_plugin_t pscom_plugin_shm = {
    .name = "shm",
    .api_version = PSCOM_PLUGIN_API_VERSION,
    .priority = 90,
    .rendezvous = SHM_RNDV,
    .env = shm_env,
    .init = shm_init,
    .destroy = shm_destroy,
    .con_offer = shm_offer,
    .con_accept = shm_accept,
    .con_finish = shm_finish,
    .con_abort = shm_abort,
    .con_start = shm_start,
    .counters = shm_counters,
};
PSCOM_PLUGIN_DEFINE(pscom_plugin_shm);
