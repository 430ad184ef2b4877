/*
 * mpi_pp: MPI point-to-point and collective micro-benchmark (plain MPI-3).
 *
 * The same source builds with any mpicc, so that our MPI and its peers (Debian's MPICH, Open
 * MPI) run the very same loops. Modes:
 *   lat        blocking ping-pong MPI_Send/MPI_Recv between ranks 0 and 1 (as osu_latency);
 *              us = round trip / 2.
 *   bw         per iteration a window of 64 MPI_Isend + MPI_Waitall on rank 0, 64 MPI_Irecv +
 *              MPI_Waitall on rank 1, then a 4-byte ack back (as osu_bw); us = time per
 *              message, MB/s = 10^6 bytes per second.
 *   bibw       both ranks 0 and 1 post a window of 64 MPI_Irecv and 64 MPI_Isend, then one
 *              MPI_Waitall (as osu_bibw); us = time per message, MB/s = both directions.
 *   rate       the bw loop with small messages (default 8 B); reported as messages per second.
 *   allreduce  MPI_Allreduce MPI_SUM of doubles over all ranks; us = time per call, average
 *              over the ranks (as osu_allreduce).
 *   coll       the collectives of --coll (barrier, bcast, allreduce, alltoall, allgather) over
 *              all ranks, sizes --coll-sizes; us = time per call, average over the ranks.
 * Loops adapt so that each size runs ~0.3 s (--time), or are fixed (--iters). --rss prints the
 * peak resident memory (VmHWM) of the ranks at the end.
 * Usage: mpiexec -n 2 mpi_pp [--mode lat|bw|bibw|rate|allreduce|coll|all] [--sizes 0,8,1k,4M]
 *        ... (--help).
 */
#define _POSIX_C_SOURCE 200112L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <limits.h>

#include "vmhwm.h"

enum { M_LAT = 1, M_BW = 2, M_AR = 4, M_BIBW = 8, M_RATE = 16, M_COLL = 32 };
enum { TAG_LAT = 11, TAG_BW = 12, TAG_ACK = 13 };

/* what one measurement runs; the first four between ranks 0 and 1, the others on all ranks */
enum kernel {
    K_LAT,
    K_BW,
    K_BIBW,
    K_RATE,
    K_BARRIER,
    K_BCAST,
    K_ALLREDUCE,
    K_ALLTOALL,
    K_ALLGATHER
};
static const char *const kname[] = {"lat",   "bw",        "bibw",     "rate",     "barrier",
                                    "bcast", "allreduce", "alltoall", "allgather"};
#define N_KERNELS   ((int)(sizeof(kname) / sizeof(kname[0])))
#define IS_COLL(k)  ((k) >= K_BARRIER)
#define WINDOWED(k) ((k) == K_BW || (k) == K_BIBW || (k) == K_RATE)

#define MAX_SIZES    64
#define MAX_LOOPS    1000000000ull
#define MAX_MSG      ((size_t)1 << 30)  /* counts are int */
#define VERIFY_BYTES ((size_t)64 << 20) /* --verify bw: distinct slots up to this much memory */
#define MAX_REPORT   10 /* messages about single errors per rank before we only count */
#define MAX_CALIB    12 /* calibration runs per size at most */

struct sizes {
    size_t v[MAX_SIZES];
    int n;
};

static struct {
    int modes;
    struct sizes lat, bw, ar, rate, coll_sizes;
    int colls; /* --coll: bit (1 << kernel) per collective */
    int csv;
    int rss;
    long warmup;              /* -1: per mode default */
    unsigned long long iters; /* 0: adaptive */
    double target;            /* adaptive: seconds per size */
    int window;
    int verify;
} opt = {.modes = M_LAT | M_BW | M_AR,
         .colls =
             1 << K_BARRIER | 1 << K_BCAST | 1 << K_ALLREDUCE | 1 << K_ALLTOALL | 1 << K_ALLGATHER,
         .warmup = -1,
         .target = 0.3,
         .window = 64};

static int rank, nprocs;
static MPI_Comm pair = MPI_COMM_NULL; /* ranks 0 and 1 */
static char *sbuf, *rbuf;
static size_t bufsize;
static MPI_Request *reqs;
static MPI_Status *stats;
static unsigned long long run_seq; /* verify: every run gets its own patterns */
static long long errors;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpiexec -n 2 mpi_pp [options]\n"
            "  --mode M        lat, bw, bibw, rate, allreduce (ar), coll or all (= lat,bw,\n"
            "                  allreduce), or a comma list (default all)\n"
            "  --sizes L       message sizes for all selected modes, e.g. 0,8,1k,4M (k, M, G =\n"
            "                  1024, 1024^2, 1024^3)\n"
            "  --lat-sizes L   latency sizes (default 0,8,1k,4M)\n"
            "  --bw-sizes L    bw and bibw sizes (default 256k,1M,4M)\n"
            "  --rate-sizes L  message rate sizes (default 8)\n"
            "  --ar-sizes L    allreduce sizes, multiples of 8 (default 8)\n"
            "  --coll L        coll: comma list of barrier, bcast, allreduce, alltoall,\n"
            "                  allgather (default all five)\n"
            "  --coll-sizes L  coll sizes (default 8,1k,64k; alltoall/allgather: per rank;\n"
            "                  allreduce: multiples of 8; barrier: none)\n"
            "  --iters N       fixed iterations per size (bw, bibw, rate: windows); default\n"
            "                  adaptive\n"
            "  --time S        adaptive: seconds per size (default 0.3)\n"
            "  --warmup N      warm-up iterations per size (default 10, windowed modes 2)\n"
            "  --window N      bw, bibw, rate: messages per window (default 64)\n"
            "  --csv           CSV: mode,size,iters,us,MBps,np (lines with # are comments)\n"
            "  --rss           at the end print the peak RSS (VmHWM) of the ranks, max and min\n"
            "  --verify        fill and check every message (timings not meaningful)\n"
            "lat, bw, bibw and rate run between ranks 0 and 1; allreduce and coll on all ranks.\n");
}

static void finish(int code) __attribute__((noreturn));
static void finish(int code)
{
    fflush(stdout);
    MPI_Finalize();
    exit(code);
}

static void usage_error(const char *what, const char *arg) __attribute__((noreturn));
static void usage_error(const char *what, const char *arg)
{
    if (rank == 0) {
        fprintf(stderr, "mpi_pp: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
        usage(stderr);
    }
    finish(2);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mul = 1;

    if (*s < '0' || *s > '9')
        return -1;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    }
    if (*end || v > MAX_MSG / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static void parse_sizes(const char *arg, struct sizes *sz)
{
    char tmp[1024], *tok, *save = NULL;

    if (strlen(arg) >= sizeof(tmp))
        usage_error("size list too long", NULL);
    strcpy(tmp, arg);
    sz->n = 0;
    for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (sz->n == MAX_SIZES)
            usage_error("too many sizes", arg);
        if (parse_size(tok, &sz->v[sz->n]))
            usage_error("bad size (at most 1G)", tok);
        sz->n++;
    }
    if (!sz->n)
        usage_error("empty size list", arg);
}

static int parse_colls(const char *arg)
{
    char tmp[256], *tok, *save = NULL;
    int c = 0, k;

    if (strlen(arg) >= sizeof(tmp))
        usage_error("bad --coll", arg);
    strcpy(tmp, arg);
    for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        for (k = K_BARRIER; k < N_KERNELS; k++)
            if (!strcmp(tok, kname[k]))
                break;
        if (k == N_KERNELS)
            usage_error("bad --coll (barrier, bcast, allreduce, alltoall, allgather)", tok);
        c |= 1 << k;
    }
    if (!c)
        usage_error("bad --coll", arg);
    return c;
}

static int parse_modes(const char *arg)
{
    char tmp[256], *tok, *save = NULL;
    int m = 0;

    if (strlen(arg) >= sizeof(tmp))
        usage_error("bad mode", arg);
    strcpy(tmp, arg);
    for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "lat") || !strcmp(tok, "latency"))
            m |= M_LAT;
        else if (!strcmp(tok, "bw") || !strcmp(tok, "bandwidth"))
            m |= M_BW;
        else if (!strcmp(tok, "bibw"))
            m |= M_BIBW;
        else if (!strcmp(tok, "rate"))
            m |= M_RATE;
        else if (!strcmp(tok, "allreduce") || !strcmp(tok, "ar"))
            m |= M_AR;
        else if (!strcmp(tok, "coll"))
            m |= M_COLL;
        else if (!strcmp(tok, "all"))
            m |= M_LAT | M_BW | M_AR;
        else
            usage_error("bad mode", tok);
    }
    if (!m)
        usage_error("bad mode", arg);
    return m;
}

static unsigned long long parse_count(const char *arg, unsigned long long max)
{
    char *end;
    unsigned long long v;

    if (*arg < '0' || *arg > '9')
        usage_error("bad number", arg);
    v = strtoull(arg, &end, 10);
    if (*end || v > max)
        usage_error("bad number", arg);
    return v;
}

static void parse_args(int argc, char **argv)
{
    struct sizes all = {.n = 0};
    int i;

    parse_sizes("0,8,1k,4M", &opt.lat);
    parse_sizes("256k,1M,4M", &opt.bw);
    parse_sizes("8", &opt.ar);
    parse_sizes("8", &opt.rate);
    parse_sizes("8,1k,64k", &opt.coll_sizes);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        char name[32];
        size_t len = eq ? (size_t)(eq - a) : strlen(a);

        if (len >= sizeof(name))
            usage_error("unknown option", a);
        memcpy(name, a, len);
        name[len] = 0;
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            if (rank == 0)
                usage(stdout);
            finish(0);
        }
        if (!strcmp(name, "--csv")) {
            opt.csv = 1;
            continue;
        }
        if (!strcmp(name, "--verify")) {
            opt.verify = 1;
            continue;
        }
        if (!strcmp(name, "--rss")) {
            opt.rss = 1;
            continue;
        }
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            usage_error("option needs a value", a);
        if (!strcmp(name, "--mode"))
            opt.modes = parse_modes(val);
        else if (!strcmp(name, "--sizes"))
            parse_sizes(val, &all);
        else if (!strcmp(name, "--lat-sizes"))
            parse_sizes(val, &opt.lat);
        else if (!strcmp(name, "--bw-sizes"))
            parse_sizes(val, &opt.bw);
        else if (!strcmp(name, "--ar-sizes"))
            parse_sizes(val, &opt.ar);
        else if (!strcmp(name, "--rate-sizes"))
            parse_sizes(val, &opt.rate);
        else if (!strcmp(name, "--coll-sizes"))
            parse_sizes(val, &opt.coll_sizes);
        else if (!strcmp(name, "--coll"))
            opt.colls = parse_colls(val);
        else if (!strcmp(name, "--iters"))
            opt.iters = parse_count(val, MAX_LOOPS);
        else if (!strcmp(name, "--warmup"))
            opt.warmup = (long)parse_count(val, 1000000);
        else if (!strcmp(name, "--window"))
            opt.window = (int)parse_count(val, 1 << 16);
        else if (!strcmp(name, "--time")) {
            char *end;

            opt.target = strtod(val, &end);
            if (*end || !(opt.target > 0 && opt.target <= 60))
                usage_error("bad --time (seconds, 0..60)", val);
        } else
            usage_error("unknown option", a);
    }
    if (all.n) /* --sizes wins for every selected mode */
        opt.lat = opt.bw = opt.ar = opt.rate = opt.coll_sizes = all;
    if (opt.window < 1)
        usage_error("--window must be at least 1", NULL);
    if (opt.modes & M_AR)
        for (i = 0; i < opt.ar.n; i++)
            if (opt.ar.v[i] < 8 || opt.ar.v[i] % 8)
                usage_error("allreduce sizes must be multiples of 8 (doubles)", NULL);
    if ((opt.modes & M_COLL) && (opt.colls & 1 << K_ALLREDUCE))
        for (i = 0; i < opt.coll_sizes.n; i++)
            if (opt.coll_sizes.v[i] < 8 || opt.coll_sizes.v[i] % 8)
                usage_error("--coll allreduce: sizes must be multiples of 8 (doubles)", NULL);
    if ((opt.modes & (M_LAT | M_BW | M_BIBW | M_RATE)) && nprocs < 2)
        usage_error("lat, bw, bibw and rate need at least 2 ranks", NULL);
}

static size_t max_size(const struct sizes *sz)
{
    size_t m = 0;
    int i;

    for (i = 0; i < sz->n; i++)
        m = sz->v[i] > m ? sz->v[i] : m;
    return m;
}

/* bw: distinct buffer slots per message. Without --verify all messages of a window share one
   buffer, as in osu_bw; --verify needs one slot per message in flight, so it may shrink the
   window where slots of `size` do not fit into VERIFY_BYTES. */
static int bw_window(size_t size)
{
    size_t slots;

    if (!opt.verify || !size)
        return opt.window;
    slots = bufsize / size;
    return slots < (size_t)opt.window ? (int)slots : opt.window;
}

static void alloc_buffers(void)
{
    size_t need = 4096, m;
    void *p = NULL;

    if (opt.modes & M_LAT)
        need = max_size(&opt.lat) > need ? max_size(&opt.lat) : need;
    if (opt.modes & M_AR)
        need = max_size(&opt.ar) > need ? max_size(&opt.ar) : need;
    if (opt.modes & M_COLL) {
        m = max_size(&opt.coll_sizes);
        if (opt.colls & (1 << K_ALLTOALL | 1 << K_ALLGATHER))
            m *= (size_t)nprocs; /* one block per rank */
        need = m > need ? m : need;
    }
    if (opt.modes & (M_BW | M_BIBW | M_RATE)) {
        m = 0;
        if (opt.modes & (M_BW | M_BIBW))
            m = max_size(&opt.bw);
        if ((opt.modes & M_RATE) && max_size(&opt.rate) > m)
            m = max_size(&opt.rate);
        if (opt.verify) {
            size_t all = m * (size_t)opt.window;
            m = all < VERIFY_BYTES ? all : m > VERIFY_BYTES ? m : VERIFY_BYTES;
        }
        need = m > need ? m : need;
    }
    bufsize = need;
    if (posix_memalign(&p, 4096, bufsize)) {
        fprintf(stderr, "mpi_pp: rank %d: out of memory (%zu bytes)\n", rank, bufsize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sbuf = p;
    if (posix_memalign(&p, 4096, bufsize)) {
        fprintf(stderr, "mpi_pp: rank %d: out of memory (%zu bytes)\n", rank, bufsize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rbuf = p;
    memset(sbuf, 'a', bufsize); /* touch every page before timing */
    memset(rbuf, 'b', bufsize);
    reqs = malloc(sizeof(*reqs) * 2 * (size_t)opt.window); /* bibw: receives and sends */
    stats = malloc(sizeof(*stats) * 2 * (size_t)opt.window);
    if (!reqs || !stats)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- verify patterns ---- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t seed_of(unsigned long long iter, unsigned slot)
{
    return mix(run_seq * 0x100000001b3ull ^ (iter << 17) ^ slot);
}

static void fill(char *buf, size_t size, uint64_t seed)
{
    size_t i;
    uint64_t v = 0;

    for (i = 0; i < size; i++) {
        if (!(i & 7))
            v = mix(seed + (i >> 3));
        buf[i] = (char)(v >> ((i & 7) * 8));
    }
}

static void error_msg(const char *what, unsigned long long iter, const char *detail)
{
    if (++errors <= MAX_REPORT)
        fprintf(stderr, "mpi_pp: rank %d: verify %s iteration %llu: %s\n", rank, what, iter,
                detail);
}

static void check(const char *buf, size_t size, uint64_t seed, MPI_Status *st, const char *what,
                  unsigned long long iter)
{
    size_t i;
    uint64_t v = 0;
    int count;
    char msg[128];

    if (st) /* collectives: no status */
        MPI_Get_count(st, MPI_BYTE, &count);
    else
        count = (int)size;
    if (count < 0 || (size_t)count != size) {
        snprintf(msg, sizeof(msg), "received %d bytes instead of %zu", count, size);
        error_msg(what, iter, msg);
        return;
    }
    for (i = 0; i < size; i++) {
        if (!(i & 7))
            v = mix(seed + (i >> 3));
        if (buf[i] != (char)(v >> ((i & 7) * 8))) {
            snprintf(msg, sizeof(msg), "%zu-byte message differs first at byte %zu", size, i);
            error_msg(what, iter, msg);
            return;
        }
    }
}

/* ---- kernels: return seconds (as seen by rank 0 of the communicator) ---- */

static double run_lat(size_t size, unsigned long long n)
{
    int count = (int)size;
    unsigned long long i;
    MPI_Status st;
    double t0;

    MPI_Barrier(pair);
    t0 = MPI_Wtime();
    if (rank == 0) {
        for (i = 0; i < n; i++) {
            if (opt.verify)
                fill(sbuf, size, seed_of(i, 0));
            MPI_Send(sbuf, count, MPI_BYTE, 1, TAG_LAT, pair);
            MPI_Recv(rbuf, count, MPI_BYTE, 1, TAG_LAT, pair, &st);
            if (opt.verify)
                check(rbuf, size, seed_of(i, 1), &st, "lat pong", i);
        }
    } else {
        for (i = 0; i < n; i++) {
            MPI_Recv(rbuf, count, MPI_BYTE, 0, TAG_LAT, pair, &st);
            if (opt.verify) {
                check(rbuf, size, seed_of(i, 0), &st, "lat ping", i);
                fill(sbuf, size, seed_of(i, 1));
            }
            MPI_Send(sbuf, count, MPI_BYTE, 0, TAG_LAT, pair);
        }
    }
    return MPI_Wtime() - t0;
}

static double run_bw(size_t size, unsigned long long n)
{
    int count = (int)size, w = bw_window(size), j, ack;
    size_t stride = opt.verify ? size : 0;
    unsigned long long i;
    double t0;

    MPI_Barrier(pair);
    t0 = MPI_Wtime();
    if (rank == 0) {
        for (i = 0; i < n; i++) {
            for (j = 0; j < w; j++) {
                char *b = sbuf + (size_t)j * stride;

                if (opt.verify)
                    fill(b, size, seed_of(i, (unsigned)j));
                MPI_Isend(b, count, MPI_BYTE, 1, TAG_BW, pair, &reqs[j]);
            }
            MPI_Waitall(w, reqs, stats);
            MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, pair, MPI_STATUS_IGNORE);
            if (opt.verify && ack != (int)(i & INT_MAX))
                error_msg("bw ack", i, "wrong ack");
        }
    } else {
        for (i = 0; i < n; i++) {
            for (j = 0; j < w; j++)
                MPI_Irecv(rbuf + (size_t)j * stride, count, MPI_BYTE, 0, TAG_BW, pair, &reqs[j]);
            MPI_Waitall(w, reqs, stats);
            if (opt.verify)
                for (j = 0; j < w; j++)
                    check(rbuf + (size_t)j * stride, size, seed_of(i, (unsigned)j), &stats[j], "bw",
                          i);
            ack = (int)(i & INT_MAX);
            MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, pair);
        }
    }
    return MPI_Wtime() - t0;
}

/* bibw: both ranks receive a window from the other and send one to it at the same time. */
static double run_bibw(size_t size, unsigned long long n)
{
    int count = (int)size, w = bw_window(size), peer = 1 - rank, j;
    size_t stride = opt.verify ? size : 0;
    unsigned long long i;
    double t0;

    MPI_Barrier(pair);
    t0 = MPI_Wtime();
    for (i = 0; i < n; i++) {
        for (j = 0; j < w; j++)
            MPI_Irecv(rbuf + (size_t)j * stride, count, MPI_BYTE, peer, TAG_BW, pair, &reqs[j]);
        for (j = 0; j < w; j++) {
            char *b = sbuf + (size_t)j * stride;

            if (opt.verify)
                fill(b, size, seed_of(i, (unsigned)(rank << 20 | j)));
            MPI_Isend(b, count, MPI_BYTE, peer, TAG_BW, pair, &reqs[w + j]);
        }
        MPI_Waitall(2 * w, reqs, stats);
        if (opt.verify)
            for (j = 0; j < w; j++)
                check(rbuf + (size_t)j * stride, size, seed_of(i, (unsigned)(peer << 20 | j)),
                      &stats[j], "bibw", i);
    }
    return MPI_Wtime() - t0;
}

static void coll_fill(enum kernel k, size_t size, unsigned long long i)
{
    int r;

    if (k == K_BCAST && rank == 0)
        fill(sbuf, size, seed_of(i, 0));
    else if (k == K_ALLTOALL) /* block r goes to rank r */
        for (r = 0; r < nprocs; r++)
            fill(sbuf + (size_t)r * size, size, seed_of(i, (unsigned)(rank << 16 | r)));
    else if (k == K_ALLGATHER)
        fill(sbuf, size, seed_of(i, (unsigned)rank));
}

static void coll_check(enum kernel k, size_t size, unsigned long long i)
{
    int r;

    if (k == K_BCAST && rank != 0)
        check(rbuf, size, seed_of(i, 0), NULL, "bcast", i);
    else if (k == K_ALLTOALL) /* block r came from rank r */
        for (r = 0; r < nprocs; r++)
            check(rbuf + (size_t)r * size, size, seed_of(i, (unsigned)(r << 16 | rank)), NULL,
                  "alltoall", i);
    else if (k == K_ALLGATHER)
        for (r = 0; r < nprocs; r++)
            check(rbuf + (size_t)r * size, size, seed_of(i, (unsigned)r), NULL, "allgather", i);
}

/* allreduce: ordinary numbers, not the bytes of the buffer fill; with --verify small integers
   that differ per iteration, so that the sum is exact in any order */
static void ar_fill(double *in, int k, unsigned long long i)
{
    int e;

    for (e = 0; e < k; e++)
        in[e] =
            (double)(rank + 1) + (opt.verify ? (double)((i + run_seq + (unsigned)e) % 1000) : 0);
}

static void ar_check(const double *out, int k, unsigned long long i)
{
    char msg[96];
    int e;

    for (e = 0; e < k; e++) {
        double want = (double)nprocs * (nprocs + 1) / 2 +
                      (double)nprocs * (double)((i + run_seq + (unsigned)e) % 1000);
        if (out[e] != want) {
            snprintf(msg, sizeof(msg), "element %d is %g instead of %g", e, out[e], want);
            error_msg("allreduce", i, msg);
            break;
        }
    }
}

/* collectives on all ranks; returns the time per run averaged over the ranks (on rank 0) */
static double run_coll(enum kernel k, size_t size, unsigned long long n)
{
    int count = (int)size, nd = (int)(size / sizeof(double));
    double *in = (double *)(void *)sbuf, *out = (double *)(void *)rbuf, t, sum = 0;
    unsigned long long i;

    if (k == K_ALLREDUCE)
        ar_fill(in, nd, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    for (i = 0; i < n; i++) {
        if (opt.verify) {
            if (k == K_ALLREDUCE)
                ar_fill(in, nd, i);
            else
                coll_fill(k, size, i);
        }
        switch (k) {
        case K_BARRIER:
            MPI_Barrier(MPI_COMM_WORLD);
            break;
        case K_BCAST:
            MPI_Bcast(rank == 0 ? sbuf : rbuf, count, MPI_BYTE, 0, MPI_COMM_WORLD);
            break;
        case K_ALLREDUCE:
            MPI_Allreduce(in, out, nd, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            break;
        case K_ALLTOALL:
            MPI_Alltoall(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
            break;
        case K_ALLGATHER:
            MPI_Allgather(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, MPI_COMM_WORLD);
            break;
        default:
            break;
        }
        if (opt.verify) {
            if (k == K_ALLREDUCE)
                ar_check(out, nd, i);
            else
                coll_check(k, size, i);
        }
    }
    t = MPI_Wtime() - t;
    MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / nprocs;
}

static double run_kernel(enum kernel k, size_t size, unsigned long long n)
{
    run_seq++;
    if (k == K_LAT)
        return run_lat(size, n);
    if (k == K_BW || k == K_RATE)
        return run_bw(size, n);
    if (k == K_BIBW)
        return run_bibw(size, n);
    return run_coll(k, size, n);
}

/*
 * Warm up, then (adaptive) scale the iterations towards opt.target from the last run's time,
 * growing at most 100x a step, until a run lasts 2/3 of the target: only that run is reported
 * (as pscom_pp). A slow warm-up (MPICH/UCX over tcp needs some 100 ms to wire up) may shrink
 * the loops to the minimum; such a short run is not accepted, the loops grow again. Rank 0
 * decides and tells the others, so all run the same loops.
 */
static double measure(enum kernel k, MPI_Comm comm, size_t size, unsigned long long *iters)
{
    unsigned long long n, min = WINDOWED(k) ? 3 : 10;
    double t = 0, accept = opt.target * 2 / 3;
    int c;

    n = opt.warmup >= 0 ? (unsigned long long)opt.warmup : WINDOWED(k) ? 2 : 10;
    if (n)
        t = run_kernel(k, size, n);
    if (opt.iters) {
        *iters = opt.iters;
        return run_kernel(k, size, opt.iters);
    }
    if (!n) { /* no warm-up: the first calibration run is the minimum */
        n = min;
        t = run_kernel(k, size, n);
    }
    for (c = 0;; c++) {
        unsigned long long next = 0;

        if (rank == 0 && c < MAX_CALIB && !(c > 0 && (t >= accept || n == MAX_LOOPS))) {
            double f = t > 0 ? opt.target / t : 100, x = (double)n * (f > 100 ? 100 : f);

            next = x < (double)min         ? min
                   : x > (double)MAX_LOOPS ? MAX_LOOPS
                                           : (unsigned long long)x;
        }
        MPI_Bcast(&next, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
        if (!next)
            break;
        n = next;
        t = run_kernel(k, size, n);
    }
    *iters = n;
    return t;
}

static void header(enum kernel k)
{
    if (opt.csv)
        return;
    switch (k) {
    case K_LAT:
        printf("# lat: blocking ping-pong MPI_Send/MPI_Recv, us = round trip / 2\n");
        break;
    case K_BW:
        printf("# bw: window of %d MPI_Isend/MPI_Irecv + 4-byte ack, us = time per message\n",
               opt.window);
        break;
    case K_BIBW:
        printf("# bibw: both ranks a window of %d MPI_Irecv + %d MPI_Isend, us = time per message, "
               "MB/s = both directions\n",
               opt.window, opt.window);
        break;
    case K_RATE:
        printf("# rate: window of %d MPI_Isend/MPI_Irecv + 4-byte ack, us = time per message\n",
               opt.window);
        break;
    default:
        printf("# %s: %d ranks, us = time per call (average over ranks)%s\n", kname[k], nprocs,
               k == K_ALLREDUCE ? ", MPI_SUM of doubles"
               : k == K_BCAST   ? ", root 0"
               : k == K_BARRIER ? ""
                                : ", size = bytes per rank");
        break;
    }
    printf("#%11s %12s %12s %12s\n", "size", WINDOWED(k) ? "windows" : "iters", "us",
           k == K_RATE ? "msgs/s" : "MB/s");
}

static void bench(enum kernel k, const struct sizes *sz)
{
    MPI_Comm comm = IS_COLL(k) ? MPI_COMM_WORLD : pair;
    int i, n = k == K_BARRIER ? 1 : sz->n;

    if (comm == MPI_COMM_NULL) /* ranks >= 2 take no part in lat, bw, bibw and rate */
        return;
    run_seq = (unsigned long long)(k + 1) << 40; /* the same on all ranks that take part */
    if (rank == 0)
        header(k);
    for (i = 0; i < n; i++) {
        size_t size = k == K_BARRIER ? 0 : sz->v[i];
        unsigned long long iters;
        double t = measure(k, comm, size, &iters), msgs, us, mbs;
        int w = bw_window(size);

        if (rank != 0)
            continue;
        msgs = (double)iters * (k == K_LAT ? 2.0 : k == K_BIBW ? 2.0 * w : WINDOWED(k) ? w : 1.0);
        us = t / msgs * 1e6;
        mbs = us > 0 ? (double)size / us : 0; /* bytes per us = 10^6 B/s */
        if (opt.csv)
            printf("%s,%zu,%llu,%.3f,%.2f,%d\n", kname[k], size, iters, us, mbs,
                   IS_COLL(k) ? nprocs : 2);
        else
            printf("%12zu %12llu %12.3f %12.*f%s\n", size, iters, us, k == K_RATE ? 0 : 2,
                   k == K_RATE ? (us > 0 ? 1e6 / us : 0) : mbs,
                   WINDOWED(k) && w != opt.window ? "  (verify: smaller window)" : "");
        fflush(stdout);
    }
}

static void report_rss(void)
{
    struct {
        long kb;
        int rank;
    } mine = {vmhwm_kb(), rank}, max = {0, 0}, min = {0, 0};

    MPI_Reduce(&mine, &max, 1, MPI_LONG_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &min, 1, MPI_LONG_INT, MPI_MINLOC, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("# rss: VmHWM max %ld kB (rank %d), min %ld kB (rank %d), %d ranks\n", max.kb,
               max.rank, min.kb, min.rank, nprocs);
}

/* First line of MPI_Get_library_version, plus MPICH's device line: tells which MPI ran. */
static void library_summary(char *out, size_t outlen)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    const char *dev;
    size_t first, devlen = 0;
    int len = 0;

    MPI_Get_library_version(lib, &len);
    if (len < 0 || len > MPI_MAX_LIBRARY_VERSION_STRING)
        len = 0;
    lib[len] = 0;
    first = strcspn(lib, "\n,");
    dev = strstr(lib, "MPICH Device:");
    if (dev) {
        dev += strlen("MPICH Device:");
        dev += strspn(dev, " \t");
        devlen = strcspn(dev, "\n \t");
    }
    snprintf(out, outlen, "%.*s%s%.*s%s", (int)first, lib, dev ? " (" : "", (int)devlen,
             dev ? dev : "", dev ? ")" : "");
    for (; *out; out++)
        if (*out == '\t')
            *out = ' ';
}

int main(int argc, char **argv)
{
    long long total = 0;
    char lib[256];
    int k;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    parse_args(argc, argv);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    alloc_buffers();
    library_summary(lib, sizeof(lib));
    if (rank == 0) {
        printf("# mpi_pp: %s; %d ranks; ", lib, nprocs);
        if (opt.iters)
            printf("%llu iterations per size", opt.iters);
        else
            printf("adaptive, ~%.2f s per size", opt.target);
        printf("%s\n", opt.verify ? "; verify (timings not meaningful)" : "");
        if (opt.csv)
            printf("mode,size,iters,us,MBps,np\n");
        fflush(stdout);
    }
    if (opt.modes & M_LAT)
        bench(K_LAT, &opt.lat);
    if (opt.modes & M_BW)
        bench(K_BW, &opt.bw);
    if (opt.modes & M_BIBW)
        bench(K_BIBW, &opt.bw);
    if (opt.modes & M_RATE)
        bench(K_RATE, &opt.rate);
    if (opt.modes & M_AR)
        bench(K_ALLREDUCE, &opt.ar);
    if (opt.modes & M_COLL)
        for (k = K_BARRIER; k < N_KERNELS; k++)
            if (opt.colls & 1 << k)
                bench((enum kernel)k, &opt.coll_sizes);

    MPI_Reduce(&errors, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && opt.verify)
        printf("# verify: %lld errors\n", total);
    if (opt.rss)
        report_rss();
    if (pair != MPI_COMM_NULL)
        MPI_Comm_free(&pair);
    free(reqs);
    free(stats);
    free(sbuf);
    free(rbuf);
    finish(total ? 1 : 0);
}
