/*
 * Mixed traffic for a given time, every byte verified (mixed.t, maint/longjob.sh):
 *   mixed SECONDS [SEED]
 * Each round all ranks draw the same pattern from SEED and the round number: pairwise
 * exchange at a random distance, many-to-one onto a random root (MPI_ANY_SOURCE), a late
 * receiver under a burst of small messages, collectives (bcast, allreduce, alltoallv) and RMA
 * puts between fences, with message sizes log-uniform from 0 to 4 MiB. Payloads are a
 * function of (sender, receiver, round, sequence): a wrong byte anywhere prints "CORRUPT ..."
 * and aborts with 3. Rank 0 decides when time is up, prints progress every 60 s and, at the
 * end, one TAP line with the rounds and bytes verified.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_MSG (4u << 20)
#define BURST   64

static int rank, np;
static long long verified;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* the round's shared random numbers */
static uint64_t rnd_state;
static uint64_t rnd(void)
{
    rnd_state = mix(rnd_state + 0x9e3779b97f4a7c15ull);
    return rnd_state;
}

static size_t rnd_size(void)
{
    /* log-uniform: a power of two up to 4 MiB, then anything below it; 1 in 16 empty */
    if (rnd() % 16 == 0)
        return 0;
    unsigned bits = (unsigned)(rnd() % 23);
    return (size_t)(rnd() % (1ull << bits)) + 1;
}

static uint64_t key(int src, int dst, int round, int seq)
{
    return mix(((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)round << 12) ^
               (uint64_t)seq);
}

static void fill(unsigned char *buf, size_t len, uint64_t k)
{
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            k = mix(k + i);
        buf[i] = (unsigned char)(k >> (8 * (i % 8)));
    }
}

static void check(const unsigned char *buf, size_t len, uint64_t k, const char *what, int from,
                  int round)
{
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            k = mix(k + i);
        if (buf[i] != (unsigned char)(k >> (8 * (i % 8)))) {
            fprintf(stderr, "CORRUPT: rank %d, round %d, %s from %d: byte %zu of %zu\n", rank,
                    round, what, from, i, len);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    verified += (long long)len;
}

static unsigned char *sbuf, *rbuf;
/* A pattern's messages of a later round may arrive while a rank still receives an earlier
 * one (only collectives hold ranks together): each point-to-point pattern has a communicator
 * of its own, so that a receive with MPI_ANY_SOURCE never takes another pattern's message */
static MPI_Comm comm_pw, comm_m2o, comm_late;

static void pairwise(int round)
{
    int d = 1 + (int)(rnd() % (uint64_t)(np > 1 ? np - 1 : 1));
    size_t len = rnd_size();
    int to = (rank + d) % np, from = (rank - d + np) % np;
    MPI_Request rq[2];
    MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 warns about its size */
    fill(sbuf, len, key(rank, to, round, 0));
    MPI_Irecv(rbuf, (int)len, MPI_BYTE, from, round & 0x7fff, comm_pw, &rq[0]);
    MPI_Isend(sbuf, (int)len, MPI_BYTE, to, round & 0x7fff, comm_pw, &rq[1]);
    MPI_Waitall(2, rq, st);
    check(rbuf, len, key(from, rank, round, 0), "pairwise", from, round);
}

/* Senders may be rounds ahead of a root that still receives: the tag names the round (mod
 * 1024) and the sequence number, the source is any */
static int m2o_tag(int round, int s)
{
    return (round % 1024) * 32 + s;
}

/* every other rank sends n messages to root, which takes them from any source */
static void many_to_one(int round)
{
    int root = (int)(rnd() % (uint64_t)np), n = 1 + (int)(rnd() % 32);
    if (np == 1)
        return;
    size_t cap = 1 + (size_t)(rnd() % 65536);
    if (rank != root) {
        for (int s = 0; s < n; s++) {
            size_t len = mix(key(rank, root, round, s)) % cap;
            fill(sbuf, len, key(rank, root, round, s));
            MPI_Send(sbuf, (int)len, MPI_BYTE, root, m2o_tag(round, s), comm_m2o);
        }
        return;
    }
    for (int m = 0; m < n * (np - 1); m++) {
        MPI_Status st;
        int len, s = m / (np - 1);
        MPI_Recv(rbuf, (int)cap, MPI_BYTE, MPI_ANY_SOURCE, m2o_tag(round, s), comm_m2o, &st);
        MPI_Get_count(&st, MPI_BYTE, &len);
        if ((size_t)len != mix(key(st.MPI_SOURCE, root, round, s)) % cap) {
            fprintf(stderr, "CORRUPT: rank %d, round %d, many-to-one from %d: length %d\n", rank,
                    round, st.MPI_SOURCE, len);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        check(rbuf, (size_t)len, key(st.MPI_SOURCE, root, round, s), "many-to-one", st.MPI_SOURCE,
              round);
    }
}

/* a burst of small messages to a receiver that posts its receives late (unexpected queue) */
static void late_receiver(int round)
{
    int peer = rank ^ 1;
    size_t len = (size_t)(rnd() % 1024);
    if (peer >= np)
        return;
    if (rank % 2 == 0) {
        MPI_Request rq[BURST];
        MPI_Status st[BURST];
        for (int s = 0; s < BURST; s++) {
            fill(sbuf + (size_t)s * 1024, len, key(rank, peer, round, s));
            MPI_Isend(sbuf + (size_t)s * 1024, (int)len, MPI_BYTE, peer, s, comm_late, &rq[s]);
        }
        MPI_Waitall(BURST, rq, st);
    } else {
        usleep(2000);
        for (int s = BURST - 1; s >= 0; s--) { /* in reverse: every one waits in the queue */
            MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, s, comm_late, MPI_STATUS_IGNORE);
            check(rbuf, len, key(peer, rank, round, s), "late", peer, round);
        }
    }
}

static void collectives(int round)
{
    int root = (int)(rnd() % (uint64_t)np);
    size_t len = rnd_size();
    if (rank == root)
        fill(rbuf, len, key(root, -1, round, 1));
    MPI_Bcast(rbuf, (int)len, MPI_BYTE, root, MPI_COMM_WORLD);
    check(rbuf, len, key(root, -1, round, 1), "bcast", root, round);

    int n = 1 + (int)(rnd() % 4096);
    int64_t *v = (int64_t *)sbuf, *sum = (int64_t *)rbuf;
    for (int i = 0; i < n; i++)
        v[i] = (int64_t)(key(rank, i, round, 2) & 0xffffff);
    MPI_Allreduce(v, sum, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        int64_t want = 0;
        for (int r = 0; r < np; r++)
            want += (int64_t)(key(r, i, round, 2) & 0xffffff);
        if (sum[i] != want) {
            fprintf(stderr, "CORRUPT: rank %d, round %d, allreduce element %d\n", rank, round, i);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    verified += n * 8;

    /* alltoallv: i sends (key(i, j) % cap) bytes to j */
    size_t cap = 1 + (size_t)(rnd() % (MAX_MSG / (size_t)np));
    int sc[np], sd[np], rc[np], rd[np], so = 0, ro = 0;
    for (int j = 0; j < np; j++) {
        sc[j] = (int)(mix(key(rank, j, round, 3)) % cap);
        rc[j] = (int)(mix(key(j, rank, round, 3)) % cap);
        sd[j] = so;
        rd[j] = ro;
        fill(sbuf + so, (size_t)sc[j], key(rank, j, round, 3));
        so += sc[j];
        ro += rc[j];
    }
    MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    for (int j = 0; j < np; j++)
        check(rbuf + rd[j], (size_t)rc[j], key(j, rank, round, 3), "alltoallv", j, round);
}

static MPI_Win win;
static unsigned char *winbuf;

static void rma(int round)
{
    size_t len = rnd_size() % (MAX_MSG / 4);
    int to = (rank + 1) % np, from = (rank - 1 + np) % np;
    fill(sbuf, len, key(rank, to, round, 4));
    MPI_Win_fence(0, win);
    MPI_Put(sbuf, (int)len, MPI_BYTE, to, 0, (int)len, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    check(winbuf, len, key(from, rank, round, 4), "put", from, round);
}

static void (*const patterns[])(int) = {pairwise, many_to_one, late_receiver, collectives, rma};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mixed SECONDS [SEED]\n");
        MPI_Finalize();
        return 2;
    }
    double secs = atof(argv[1]);
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    sbuf = malloc(MAX_MSG + BURST * 1024);
    rbuf = malloc(MAX_MSG + BURST * 1024);
    MPI_Win_allocate(MAX_MSG / 4, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &winbuf, &win);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_pw);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_m2o);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_late);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "mixed: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        printf("1..1\n");

    double t0 = MPI_Wtime(), next_report = 60;
    int round = 0, stop = 0;
    while (!stop) {
        rnd_state = mix(seed ^ ((uint64_t)round << 20));
        patterns[rnd() % 5](round);
        round++;
        if (rank == 0) {
            double t = MPI_Wtime() - t0;
            stop = t >= secs;
            if (t >= next_report) {
                printf("# %.0f s: %d rounds, rank 0 verified %lld bytes\n", t, round, verified);
                fflush(stdout);
                next_report += 60;
            }
        }
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    long long total = 0;
    MPI_Reduce(&verified, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ok 1 - %d rounds of mixed traffic in %.0f s, %lld bytes verified\n", round,
               MPI_Wtime() - t0, total);
    MPI_Win_free(&win);
    MPI_Comm_free(&comm_pw);
    MPI_Comm_free(&comm_m2o);
    MPI_Comm_free(&comm_late);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
