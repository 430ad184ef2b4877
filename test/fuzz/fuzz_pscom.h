/*
 * fuzz_pscom.h - what the fuzz targets share: libpscom started once per process, connections
 * whose transport is the harness itself (bytes come in through pscom_read_feed, as from any
 * transport; what core writes is kept for the harness to read), and a reader of the fuzz input.
 *
 * The targets are compiled together with libpscom's own sources (test/fuzz/Makefile), so they
 * may use core's internal calls (pscom_priv.h) to set a connection up without a handshake.
 */
#ifndef FUZZ_PSCOM_H_INCLUDED
#define FUZZ_PSCOM_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "pscom_priv.h"

/* ---- the fuzz input ---- */

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in_t;

static inline uint64_t fz_uint(fz_in_t *in, size_t bytes) /* little endian; 0 past the end */
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)in->p[0] << (8 * i);
    return v;
}
#define fz_u8(in)  ((uint8_t)fz_uint(in, 1))
#define fz_u16(in) ((uint16_t)fz_uint(in, 2))
#define fz_u32(in) ((uint32_t)fz_uint(in, 4))
#define fz_u64(in) fz_uint(in, 8)

/* Up to *n bytes of the input (fewer at its end): *n says how many */
static inline const uint8_t *fz_take(fz_in_t *in, size_t *n)
{
    const uint8_t *p = in->p;
    if (*n > in->n)
        *n = in->n;
    in->p += *n;
    in->n -= *n;
    return p;
}

/* ---- pscom ---- */

/* Set the environment (NULL-terminated "NAME=value" list; PSP_DEBUG_OUT=/dev/null unless
   FUZZ_LOG is set) and initialise pscom; once per process. */
void fz_pscom_init(const char *const *env);

/* A connection of sock that is up (state RW) and whose transport is the harness. */
pscom_con_t *fz_con_new(pscom_sock_t *sock);
/* Feed len bytes to con as a transport would: in pieces of sizes drawn from seed (0: whole),
   partly through pscom_read_direct_buf where core offers it (as tcp reads). Stops when the
   connection fails. */
void fz_con_feed(pscom_con_t *con, const void *buf, size_t len, uint32_t seed);
/* Is con still up (not failed, not closed by the peer's EOF)? */
int fz_con_up(pscom_con_t *con);
/* The transport breaks (the peer is gone): core fails the connection and tells its socket's
   con_error, as for a real transport. The connection object stays until its user closes it. */
void fz_con_break(pscom_con_t *con);

/* What core wrote on con since the last fz_out_clear: whole messages, unless more than the
   capture holds came (then *overflow is set and the rest is missing). */
const uint8_t *fz_out(pscom_con_t *con, size_t *len, int *overflow);
void fz_out_clear(pscom_con_t *con);

/* One message of a captured stream at *off: its header, user header and data (dlen bytes of
   it captured). 1 and *off advanced, or 0 at the end or at a message cut short. */
typedef struct fz_msg {
    pscom_header_net_t hdr;
    const uint8_t *xh;
    const uint8_t *data;
} fz_msg_t;
int fz_msg_next(const uint8_t *buf, size_t len, size_t *off, fz_msg_t *m);

/* A user message (pscom header, user header, data) as it travels, into out (room for
   HDR_SIZE + xlen + dlen bytes); its length */
size_t fz_wire_msg(uint8_t *out, const void *xh, size_t xlen, const void *data, size_t dlen);

/* Progress without blocking: pollers, and every file descriptor (handshakes, tcp), rounds
   times. */
void fz_progress(int rounds);

/* Seed mode (make -C test/fuzz seeds): FUZZ_SEEDS names the directory a target writes its
   seeds to, from LLVMFuzzerInitialize, before it exits. NULL when fuzzing. */
const char *fz_seeds_dir(void);
void fz_seed(const char *name, const void *buf, size_t len);

/* What the connecting side of a real pscom connection sends: a connection from a new socket of
   this process to server (listening), through a relay that records the bytes into buf (at most
   max): the handshake frames, then, over the transport agreed, four messages and the EOF of its
   close. cuts: where the relay's reads ended (at most FZ_CUTS_MAX; the connector waits for
   each answer, so the first ones end frames). The transport is what pscom picks: the caller
   switches off the others (PSP_LOOP=0, PSP_SHM=0 for tcp). Its length; exits on failure. */
#define FZ_CUTS_MAX 64
size_t fz_capture_connect(pscom_socket_t *server, uint8_t *buf, size_t max, size_t *cuts,
                          int *n_cuts);

#endif
