/*
 * fuzz_msg.h - the input of the targets that fuzz a protocol carried in pscom messages (psnamd,
 * the psnam client, the gw plugin, psgwd, the netmod's active messages): a sequence of records,
 * each one message.
 *
 *   u8  op     what the target does with it besides sending it (its own bits)
 *   u16 xlen   user header bytes that follow (at most PSCOM_XHEADER_MAX are used)
 *   u16 dlen   data bytes that follow
 *   xlen bytes of user header, dlen bytes of data (fewer at the end of the input)
 */
#ifndef FUZZ_MSG_H_INCLUDED
#define FUZZ_MSG_H_INCLUDED

#include "fuzz_pscom.h"

typedef struct fz_rec {
    uint8_t op;
    _Alignas(16) uint8_t xh[PSCOM_XHEADER_MAX];
    size_t xlen;
    const uint8_t *data;
    size_t dlen;
} fz_rec_t;

/* the next record: 1, or 0 at the end of the input */
static inline int fz_rec_next(fz_in_t *in, fz_rec_t *r)
{
    if (!in->n)
        return 0;
    r->op = fz_u8(in);
    size_t xlen = fz_u16(in);
    r->dlen = fz_u16(in);
    r->xlen = xlen < PSCOM_XHEADER_MAX ? xlen : PSCOM_XHEADER_MAX;
    const uint8_t *x = fz_take(in, &r->xlen);
    memcpy(r->xh, x, r->xlen);
    memset(r->xh + r->xlen, 0, sizeof(r->xh) - r->xlen); /* a short header reads as zeros */
    if (xlen > r->xlen)
        fz_take(in, &(size_t){xlen - r->xlen});
    r->data = fz_take(in, &r->dlen);
    return 1;
}

/* A record into buf (the seeds): its length */
static inline size_t fz_rec_put(uint8_t *buf, uint8_t op, const void *xh, size_t xlen,
                                const void *data, size_t dlen)
{
    buf[0] = op;
    buf[1] = (uint8_t)xlen, buf[2] = (uint8_t)(xlen >> 8);
    buf[3] = (uint8_t)dlen, buf[4] = (uint8_t)(dlen >> 8);
    if (xlen)
        memcpy(buf + 5, xh, xlen);
    if (dlen)
        memcpy(buf + 5 + xlen, data, dlen);
    return 5 + xlen + dlen;
}

/* Feed record r to con as one pscom user message (its bytes as a transport delivers them, in
   pieces drawn from seed) */
static inline void fz_rec_feed(pscom_con_t *con, const fz_rec_t *r, uint32_t seed)
{
    static uint8_t wire[HDR_SIZE + PSCOM_XHEADER_MAX + 65536];
    size_t n = fz_wire_msg(wire, r->xh, r->xlen, r->data, r->dlen);
    fz_con_feed(con, wire, n, seed);
}

#endif
