/*
 * fuzz_shm: the shm transport's ring reader (plugins/shm/shm.c: shm_read and the poller, the
 * doorbell's end-of-peer path) with the harness as the peer process. Each run makes a ring
 * pair in a SysV arena as a connecting peer would (shm_arena_new_pair), offers it to the shm
 * plugin (con_accept: the plugin claims and checks it), starts the connection on a socketpair
 * doorbell, and then writes the fuzz input into the ring the plugin reads: records with their
 * message number and length as the input says, wrong ones included, packed or on new lines,
 * with wrap marks where the ring ends. What the plugin reads goes on to core's wire parser. At
 * the end the harness's doorbell end closes (the peer died).
 *
 * Input: a geometry byte (ring of 2-5 records of 256/320/512/8320 bytes), then records
 *   u8 ctl   bit 0: publish with a wrong message number (1 + (ctl >> 6) ahead)
 *            bit 1: a progress round after it
 *            bit 2: write the peer's "consumed" count of the plugin's own ring (next 4 bytes)
 *            bit 3: ring the doorbell
 *            bit 4: the next record starts on a new line (SHM_REC_ALIGN)
 *            bit 5: a user message without pscom's header (SHM_REC_USER); its user header's
 *                   length is the byte after the payload
 *   u16 len  the record's length field; that many bytes follow (at most the largest payload)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fuzz_pscom.h"
#include "shm_arena.h"
#include "shm_offer.h"

static pscom_sock_t *sock;
static const pscom_plugin_t *shm;

typedef struct ring_pos {
    shm_ring_t *ring;
    uint32_t ring_bytes, off, seq;
    uint64_t pos;
} ring_pos_t;

/* bytes the record of header word takes at off (a wrap mark: to the end) */
static uint32_t rec_span(const ring_pos_t *r, uint64_t word)
{
    uint32_t what = (uint32_t)word;
    return what == SHM_REC_WRAP ? r->ring_bytes - r->off : shm_rec_span(r->off, what);
}

static void advance(ring_pos_t *r, uint32_t span)
{
    r->pos += span;
    r->off += span;
    if (r->off == r->ring_bytes)
        r->off = 0;
}

/* what the plugin wrote to its ring: follow its records to the first zero header */
static uint64_t written(ring_pos_t *back)
{
    for (;;) {
        uint64_t word = atomic_load(&shm_ring_rec(back->ring, back->off)->word);
        if (!word || (uint32_t)(word >> 32) != back->seq + 1)
            return back->pos;
        if ((uint32_t)word != SHM_REC_WRAP)
            back->seq++;
        advance(back, rec_span(back, word));
    }
}

/* room for a record of len bytes (and the zero header behind it, and a line of padding),
   wrapping first where it would cross the end; 0 while the plugin has not read enough */
static int room(ring_pos_t *w, uint32_t len)
{
    uint32_t need = shm_rec_size(len) + (uint32_t)sizeof(shm_rec_t) + 56;
    uint32_t skip = w->off + need > w->ring_bytes ? w->ring_bytes - w->off : 0;
    if (w->pos + skip + need - atomic_load(&w->ring->consumed) > w->ring_bytes)
        return 0;
    if (skip) {
        shm_ring_wrap(w->ring, w->off, w->seq + 1);
        advance(w, skip);
    }
    return 1;
}

static void setup(void)
{
    fz_pscom_init((const char *const[]){"PSP_SHM_CMA=0", "PSP_SHM_ARENA=1024", NULL});
    sock = get_sock(pscom_open_socket(0, 0));
    int idx = pscom_plugin_index("shm");
    shm = idx >= 0 ? pscom_plugin_get(idx) : NULL;
    if (!shm)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t slot_sizes[4] = {256, 320, 512, 8320};
    if (!sock)
        setup();
    fz_in_t in = {data, size};
    uint8_t geo = fz_u8(&in);
    uint32_t nslots = 2 + (geo & 3), slot_size = slot_sizes[(geo >> 2) & 3];

    /* the peer: a pair of rings, offered to the plugin */
    shm_arena_t *arena;
    shm_pair_ref_t ref;
    shm_pair_t *pair = shm_arena_new_pair(nslots, slot_size, 1024, &arena, &ref);
    if (!pair)
        abort();
    shm_offer_t o = {.magic = SHM_OFFER_MAGIC,
                     .version = SHM_OFFER_VERSION,
                     .shmid = ref.shmid,
                     .index = ref.index,
                     .npairs = ref.npairs,
                     .nslots = ref.nslots,
                     .slot_size = ref.slot_size,
                     .arena_cookie = ref.arena_cookie,
                     .pair_cookie = ref.pair_cookie};
    pscom_con_t *con = pscom_con_create(sock);
    con->peer_node = pscom_global.node_id; /* the handshake's HELLO said so */
    unsigned char reply[PSCOM_HS_BLOB_MAX];
    size_t rlen = 0;
    int sv[2];
    if (shm->con_accept(con, &o, sizeof(o), reply, &rlen) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    pscom_con_established(con, shm, sv[0]);

    /* ring 0 is the creator's (ours), the plugin reads it; it writes ring 1 */
    uint32_t ring_bytes = shm_ring_bytes(nslots, slot_size);
    ring_pos_t w = {shm_pair_ring(pair, 0), ring_bytes, 0, 0, 0};
    ring_pos_t back = {shm_pair_ring(pair, 1), ring_bytes, 0, 0, 0};
    uint32_t payload = slot_size - (uint32_t)sizeof(shm_rec_t);
    while (in.n && fz_con_up(con)) {
        uint8_t ctl = fz_u8(&in);
        uint32_t len = fz_u16(&in);
        if (ctl & 4)
            atomic_store(&back.ring->consumed, fz_u32(&in));
        else
            atomic_store(&back.ring->consumed, written(&back)); /* all read */
        size_t n = len < payload ? len : payload;
        for (int r = 0; r < 4 && !room(&w, (uint32_t)n) && fz_con_up(con); r++)
            fz_progress(1);
        if (!room(&w, (uint32_t)n))
            break; /* the plugin stopped reading (a wrong message number) */
        const uint8_t *p = fz_take(&in, &n);
        shm_rec_t *rec = shm_ring_rec(w.ring, w.off);
        memcpy(rec->data, p, n);
        uint32_t field = len | (ctl & 16 ? SHM_REC_ALIGN : 0);
        if (ctl & 32)
            field |= SHM_REC_USER | (uint32_t)fz_u8(&in) << 20;
        uint32_t span = rec_span(&w, field);
        if (w.off + span + sizeof(shm_rec_t) > ring_bytes)
            span = rec_span(&w, len), field = len; /* no line left for the next header */
        if (w.off + span + sizeof(shm_rec_t) <= ring_bytes)
            atomic_store(&shm_ring_rec(w.ring, w.off + span)->word, 0);
        else
            span = ring_bytes - w.off; /* a bad length: the plugin stops reading here */
        atomic_store(&rec->word, shm_rec_word(ctl & 1 ? w.seq + 2 + (ctl >> 6) : w.seq + 1, field));
        w.seq++;
        advance(&w, span);
        if (ctl & 8)
            (void)!write(sv[1], "", 1);
        if (ctl & 2)
            fz_progress(1);
    }
    for (int r = 0; r < 4 && fz_con_up(con); r++)
        fz_progress(1);
    close(sv[1]); /* the peer is gone: the doorbell reports it */
    /* with writes pending into a full ring the transport keeps polling and never blocks, and
       the reactor looks at idle fds (the doorbell) only every 256th round and at most every
       PSP_FD_POLL_US: rounds enough for that */
    for (int r = 0; r < 4096 && fz_con_up(con); r++)
        fz_progress(1);
    if (con->pub.state == PSCOM_CON_STATE_RW)
        abort(); /* the plugin missed its peer's end */
    pscom_close_connection(&con->pub);
    shm_arena_put(arena);
    return 0;
}

/* ---- seeds ---- */

static size_t rec(uint8_t *p, uint8_t ctl, const void *msg, size_t len)
{
    p[0] = ctl;
    p[1] = (uint8_t)len;
    p[2] = (uint8_t)(len >> 8);
    memcpy(p + 3, msg, len);
    return 3 + len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    uint8_t buf[16384], m[1024], d[600];
    memset(d, 'd', sizeof(d));
    size_t n = 0, l;
    /* a ring of 4 x 256 bytes: small messages, packed and on new lines */
    buf[n++] = 2;
    l = fz_wire_msg(m, "xh", 2, "data", 4);
    n += rec(buf + n, 0, m, l);
    l = fz_wire_msg(m, NULL, 0, NULL, 0);
    n += rec(buf + n, 2, m, l);
    l = fz_wire_msg(m, "xheader8", 8, d, 100);
    n += rec(buf + n, 8 | 16, m, l);
    for (int i = 0; i < 40; i++) { /* around the ring, past wrap marks */
        l = fz_wire_msg(m, "x", 1, d, (size_t)(i * 7 % 90));
        n += rec(buf + n, i % 3 ? 2 : 16, m, l);
    }
    for (int i = 0; i < 40; i++) { /* user messages without pscom's header: xheader, data */
        memcpy(m, "xhdr12bytes!", 12);
        memset(m + 12, 'u', 64);
        n += rec(buf + n, i % 4 ? 32 : 32 | 16, m, 12 + (size_t)(i % 9) * 8);
        buf[n++] = 12;
    }
    fz_seed("small", buf, n);
    /* a message larger than the largest record: in pieces, as shm_write cuts it */
    n = 0;
    buf[n++] = 1;
    l = fz_wire_msg(m, "xh", 2, d, sizeof(d));
    for (size_t off = 0; off < l; off += 248)
        n += rec(buf + n, 2, m + off, l - off < 248 ? l - off : 248);
    fz_seed("pieces", buf, n);
    /* a corrupt length, then a wrong sequence number */
    n = 0;
    buf[n++] = 0;
    l = fz_wire_msg(m, "x", 1, "y", 1);
    n += rec(buf + n, 0, m, l);
    buf[n - l - 2] = 0xff, buf[n - l - 1] = 0x7f; /* len 0x7fff */
    fz_seed("bad-len", buf, n);
    n = 0;
    buf[n++] = 0;
    n += rec(buf + n, 0x11, m, l);
    n += rec(buf + n, 0, m, l);
    fz_seed("bad-seq", buf, n);
    exit(0);
}
