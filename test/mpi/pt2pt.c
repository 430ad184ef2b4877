/*
 * Point-to-point semantics the netmod must get right, one TAP line each (printed by rank 0,
 * every check ANDed over all ranks): any-source/any-tag, ordering, ssend/rsend, probe,
 * mprobe/mrecv, cancel of a receive, truncation, non-contiguous types, zero bytes, self,
 * large (rendezvous-size) messages; every message size class (0 B .. 4 MiB+1) with the receive
 * posted before and after arrival, Ssend/Bsend sizes, many messages in flight.
 * Any number of ranks; pair tests skip at one rank. (datatype.c: derived datatypes.)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap_mpi.h"

static int rank, size;

/* for tests between rank pairs (rank ^ 1): with one rank there is nothing to test */
static void check_pair(int ok, const char *what)
{
    char buf[200];
    snprintf(buf, sizeof(buf), "%s%s", what, size > 1 ? "" : " # SKIP needs 2 ranks");
    check(ok, buf);
}

static void test_anysource(void)
{
    /* everyone sends its rank to 0; 0 receives with ANY_SOURCE/ANY_TAG */
    int ok = 1;
    if (rank == 0) {
        int seen = 0;
        for (int i = 1; i < size; i++) {
            int v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            ok &= v == st.MPI_SOURCE && st.MPI_TAG == 100 + v;
            seen |= 1 << v;
        }
        ok &= seen == ((1 << size) - 2);
    } else {
        MPI_Send(&rank, 1, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
    }
    check_pair(ok, "MPI_ANY_SOURCE / MPI_ANY_TAG with status");
}

static void test_order(void)
{
    /* non-overtaking: same source, same tag, arrival in send order (small and large mixed) */
    int ok = 1, peer = rank ^ 1;
    enum { N = 20, BIG = 300000 };
    if (peer < size) {
        char *big = malloc(BIG);
        if (rank % 2 == 0) {
            for (int i = 0; i < N; i++) {
                if (i % 5 == 4) {
                    memset(big, i, BIG);
                    MPI_Send(big, BIG, MPI_CHAR, peer, 5, MPI_COMM_WORLD);
                } else {
                    MPI_Send(&i, 1, MPI_INT, peer, 5, MPI_COMM_WORLD);
                }
            }
        } else {
            for (int i = 0; i < N; i++) {
                MPI_Status st;
                int count;
                MPI_Recv(big, BIG, MPI_CHAR, peer, 5, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_CHAR, &count);
                if (i % 5 == 4)
                    ok &= count == BIG && big[0] == (char)i && big[BIG - 1] == (char)i;
                else
                    ok &= count == (int)sizeof(int) && *(int *)big == i;
            }
        }
        free(big);
    }
    check_pair(ok, "message order from one sender (eager and large interleaved)");
}

static void test_ssend_rsend(void)
{
    int ok = 1, peer = rank ^ 1, v = rank, r = -1;
    MPI_Request req;
    if (peer >= size) {
        MPI_Barrier(MPI_COMM_WORLD);
        check_pair(ok, "MPI_Ssend / MPI_Issend (waits for the match) / MPI_Rsend");
        return;
    }
    if (rank % 2 == 0) {
        MPI_Ssend(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);

        /* Issend must not complete before the receiver posts (after the barrier) */
        int flag = 1;
        MPI_Issend(&v, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &req);
        for (int i = 0; i < 100; i++)
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        ok &= !flag;
        MPI_Barrier(MPI_COMM_WORLD);
        if (!flag)
            MPI_Wait(&req, MPI_STATUS_IGNORE);

        /* rsend once the peer says its receive is posted */
        MPI_Recv(NULL, 0, MPI_INT, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Rsend(&v, 1, MPI_INT, peer, 4, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&r, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ok &= r == peer;
        MPI_Barrier(MPI_COMM_WORLD);
        r = -1;
        MPI_Recv(&r, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ok &= r == peer;
        r = -1;
        MPI_Irecv(&r, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &req);
        MPI_Send(NULL, 0, MPI_INT, peer, 6, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        ok &= r == peer;
    }
    check_pair(ok, "MPI_Ssend / MPI_Issend (waits for the match) / MPI_Rsend");
}

static void test_probe(void)
{
    int ok = 1, peer = rank ^ 1;
    if (peer < size) {
        if (rank % 2 == 0) {
            int v[3] = {1, 2, 3};
            MPI_Send(v, 3, MPI_INT, peer, 9, MPI_COMM_WORLD);
            MPI_Send(v, 2, MPI_INT, peer, 10, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            int count, flag = 0, v[3];
            MPI_Probe(peer, 10, MPI_COMM_WORLD, &st); /* the second message, by tag */
            MPI_Get_count(&st, MPI_INT, &count);
            ok &= count == 2 && st.MPI_SOURCE == peer && st.MPI_TAG == 10;
            while (!flag)
                MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            ok &= count == 3 && st.MPI_TAG == 9; /* the first one still comes first */
            MPI_Recv(v, 3, MPI_INT, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(v, 3, MPI_INT, peer, 10, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            ok &= count == 2 && v[0] == 1 && v[1] == 2;
        }
    }
    check_pair(ok, "MPI_Probe / MPI_Iprobe");
}

static void test_mprobe(void)
{
    int ok = 1, peer = rank ^ 1;
    if (peer < size) {
        if (rank % 2 == 0) {
            double d[4] = {1.5, 2.5, 3.5, 4.5};
            MPI_Send(d, 4, MPI_DOUBLE, peer, 11, MPI_COMM_WORLD);
            MPI_Send(d, 1, MPI_DOUBLE, peer, 11, MPI_COMM_WORLD);
        } else {
            MPI_Message m1, m2;
            MPI_Status st;
            int count, flag = 0;
            double d[4] = {0};
            MPI_Mprobe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &m1, &st);
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            ok &= count == 4;
            /* the matched message is gone from the queue: next probe sees the second */
            while (!flag)
                MPI_Improbe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m2, &st);
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            ok &= count == 1;
            MPI_Mrecv(d, 4, MPI_DOUBLE, &m1, &st);
            ok &= d[3] == 4.5;
            MPI_Request req;
            MPI_Imrecv(d, 4, MPI_DOUBLE, &m2, &req);
            MPI_Wait(&req, &st);
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            ok &= count == 1 && d[0] == 1.5;
        }
    }
    check_pair(ok, "MPI_Mprobe / MPI_Improbe / MPI_Mrecv / MPI_Imrecv");
}

static void test_cancel(void)
{
    int ok = 1, v = 0, flag = 0;
    MPI_Request req;
    MPI_Status st;
    MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &req);
    MPI_Cancel(&req);
    MPI_Wait(&req, &st);
    MPI_Test_cancelled(&st, &flag);
    ok &= flag;
    check(ok, "cancel of a posted receive");
}

static void test_truncate(void)
{
    int ok = 1, peer = rank ^ 1;
    if (peer < size) {
        if (rank % 2 == 0) {
            int v[8] = {0};
            MPI_Send(v, 8, MPI_INT, peer, 12, MPI_COMM_WORLD);
        } else {
            int v[2];
            MPI_Status st;
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            int err = MPI_Recv(v, 2, MPI_INT, peer, 12, MPI_COMM_WORLD, &st);
            int cls = MPI_SUCCESS;
            MPI_Error_class(err, &cls);
            ok &= cls == MPI_ERR_TRUNCATE;
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        }
    }
    check_pair(ok, "truncation reports MPI_ERR_TRUNCATE");
}

static void test_noncontig_zero_self(void)
{
    int ok = 1, peer = (rank + 1) % size, from = (rank + size - 1) % size;
    /* vector: every other int of 100 */
    MPI_Datatype vec;
    MPI_Type_vector(50, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int src[100], dst[100];
    for (int i = 0; i < 100; i++) {
        src[i] = rank * 1000 + i;
        dst[i] = -1;
    }
    MPI_Sendrecv(src, 1, vec, peer, 13, dst, 1, vec, from, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 100; i++)
        ok &= dst[i] == (i % 2 ? -1 : from * 1000 + i);
    check(ok, "non-contiguous datatype (vector) both sides");

    /* non-contiguous to contiguous */
    int flat[50];
    MPI_Sendrecv(src, 1, vec, peer, 14, flat, 50, MPI_INT, from, 14, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ok = 1;
    for (int i = 0; i < 50; i++)
        ok &= flat[i] == from * 1000 + 2 * i;
    check(ok, "vector to contiguous");
    MPI_Type_free(&vec);

    /* zero bytes */
    MPI_Status st;
    int count = -1;
    MPI_Sendrecv(NULL, 0, MPI_INT, peer, 15, NULL, 0, MPI_INT, from, 15, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    check(count == 0 && st.MPI_SOURCE == from, "zero-byte message");

    /* self, nonblocking both ways, receive posted after the send */
    int a = rank, b = -1;
    MPI_Request rq[2];
    MPI_Isend(&a, 1, MPI_INT, rank, 16, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(&b, 1, MPI_INT, rank, 16, MPI_COMM_WORLD, &rq[1]);
    MPI_Status sts[2];
    MPI_Waitall(2, rq, sts);
    check(b == rank, "self send before receive");
}

static void test_large(void)
{
    /* bigger than every eager threshold: exercises pscom rendezvous */
    int ok = 1, peer = (rank + 1) % size, from = (rank + size - 1) % size;
    size_t n = 4 << 20;
    char *s = malloc(n), *r = malloc(n);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(i * 7 + rank);
    MPI_Sendrecv(s, (int)n, MPI_CHAR, peer, 17, r, (int)n, MPI_CHAR, from, 17, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (size_t i = 0; i < n; i += 4093)
        ok &= r[i] == (char)(i * 7 + from);
    free(s);
    free(r);
    check(ok, "4 MiB message around the ring");
}

/* message sizes of every protocol class: 0..3 B and every power of two -1/0/+1 up to 4 MiB+1
 * (shm ring record 8 KiB, shm rendezvous 64 KiB, shm ring 128 KiB, ...) */
enum { MAXMSG = (4 << 20) + 1, GUARD = 16, SENT = 0xee };

static int msg_sizes(int *sz)
{
    int n = 0;
    for (int i = 0; i < 4; i++)
        sz[n++] = i;
    for (int k = 3; (1 << k) <= MAXMSG; k++)
        for (int d = -1; d <= 1; d++)
            sz[n++] = (1 << k) + d;
    return n;
}

static unsigned char pattern(int from, int len, int i)
{
    return (unsigned char)(from * 31 + len * 7 + i * 13 + (i >> 9));
}

/* every byte of the message, and nothing written past it */
static int check_msg(const unsigned char *r, int from, int len, const MPI_Status *st)
{
    int ok = 1, count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    ok &= count == len && st->MPI_SOURCE == from;
    for (int i = 0; i < len; i++)
        ok &= r[i] == pattern(from, len, i);
    for (int i = len; i < len + GUARD; i++)
        ok &= r[i] == SENT;
    return ok;
}

static void test_sizes(int late)
{
    int ok = 1, peer = (rank + 1) % size, from = (rank + size - 1) % size, sz[80];
    int n = msg_sizes(sz);
    unsigned char *s = malloc(MAXMSG), *r = malloc(MAXMSG + GUARD);
    for (int k = 0; k < n; k++) {
        int len = sz[k], flag = 0;
        for (int i = 0; i < len; i++)
            s[i] = pattern(rank, len, i);
        memset(r, SENT, len + GUARD);
        MPI_Request rq[2];
        MPI_Status st[2];
        if (!late) {
            MPI_Irecv(r, len, MPI_BYTE, from, 20, MPI_COMM_WORLD, &rq[0]);
            MPI_Isend(s, len, MPI_BYTE, peer, 20, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(2, rq, st);
        } else {
            /* the message (or its rendezvous announcement) is there before the receive */
            MPI_Isend(s, len, MPI_BYTE, peer, 21, MPI_COMM_WORLD, &rq[1]);
            while (!flag)
                MPI_Iprobe(from, 21, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            MPI_Recv(r, len, MPI_BYTE, from, 21, MPI_COMM_WORLD, &st[0]);
            MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        }
        ok &= check_msg(r, from, len, &st[0]);
    }
    free(s);
    free(r);
    check(ok, late ? "sizes 0 B .. 4 MiB+1, receive posted after arrival: data, count, no overrun"
                   : "sizes 0 B .. 4 MiB+1 (2^k-1, 2^k, 2^k+1), receive posted first: data, "
                     "count, no overrun");
}

static void test_ssend_bsend_sizes(void)
{
    int ok = 1, peer = (rank + 1) % size, from = (rank + size - 1) % size;
    static const int sz[] = {0, 1, 8191, 8192, 65535, 65536, 65537, 1 << 20};
    unsigned char *s = malloc(1 << 20), *r = malloc((1 << 20) + GUARD);
    MPI_Status st;
    for (int mode = 0; mode < 2; mode++) {
        /* room for all of them: a sent message frees its space only once progress sees the
         * send complete */
        int bsize = 3 * (1 << 20) + 8 * MPI_BSEND_OVERHEAD;
        void *bbuf = malloc(bsize);
        if (mode == 1)
            MPI_Buffer_attach(bbuf, bsize);
        for (unsigned k = 0; k < sizeof(sz) / sizeof(sz[0]); k++) {
            int len = sz[k];
            MPI_Request rq;
            for (int i = 0; i < len; i++)
                s[i] = pattern(rank, len, i);
            memset(r, SENT, len + GUARD);
            if (mode == 0) { /* synchronous: the receive is posted, so this cannot deadlock */
                MPI_Irecv(r, len, MPI_BYTE, from, 22, MPI_COMM_WORLD, &rq);
                MPI_Ssend(s, len, MPI_BYTE, peer, 22, MPI_COMM_WORLD);
                MPI_Wait(&rq, &st);
            } else { /* buffered: returns before any receive is posted */
                MPI_Bsend(s, len, MPI_BYTE, peer, 23, MPI_COMM_WORLD);
                MPI_Recv(r, len, MPI_BYTE, from, 23, MPI_COMM_WORLD, &st);
            }
            ok &= check_msg(r, from, len, &st);
        }
        if (mode == 1)
            MPI_Buffer_detach(&bbuf, &bsize);
        free(bbuf);
    }
    free(s);
    free(r);
    check(ok, "MPI_Ssend and MPI_Bsend of 0 B .. 1 MiB (eager and rendezvous)");
}

static void test_many_in_flight(void)
{
    /* 1000 small messages with distinct tags, received in reverse order: matching by tag
     * through a long unexpected queue */
    enum { M = 1000 };
    int ok = 1, peer = (rank + 1) % size, from = (rank + size - 1) % size;
    static int out[M], in[M];
    static MPI_Request rq[M];
    static MPI_Status st[M];
    for (int i = 0; i < M; i++) {
        out[i] = rank * M + i;
        in[i] = -1;
        MPI_Isend(&out[i], 1, MPI_INT, peer, 1000 + i, MPI_COMM_WORLD, &rq[i]);
    }
    for (int i = M - 1; i >= 0; i--)
        MPI_Recv(&in[i], 1, MPI_INT, from, 1000 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Waitall(M, rq, st);
    for (int i = 0; i < M; i++)
        ok &= in[i] == from * M + i;

    /* and MPI_Sendrecv_replace of 400 KB */
    enum { R = 100000 };
    int *buf = malloc(R * sizeof(int));
    for (int i = 0; i < R; i++)
        buf[i] = rank + i;
    MPI_Sendrecv_replace(buf, R, MPI_INT, peer, 24, from, 24, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < R; i++)
        ok &= buf[i] == from + i;
    free(buf);
    check(ok, "1000 messages in flight received in reverse tag order; MPI_Sendrecv_replace");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..16\n");
    test_anysource();
    test_order();
    test_ssend_rsend();
    test_probe();
    test_mprobe();
    test_cancel();
    test_truncate();
    test_noncontig_zero_self();
    test_large();
    test_sizes(0);
    test_sizes(1);
    test_ssend_bsend_sizes();
    test_many_in_flight();
    MPI_Finalize();
    return 0;
}
