/*
 * ucx_probe.c - where a one-way MPI message over UCX spends its time, for any MPI that runs
 * over UCX (ours through the ucp plugin, Debian's MPICH through ch4:ucx).
 *
 * An LD_PRELOAD library for an MPI ping-pong (mpi_pp --mode lat): it wraps MPI_Send, the UCP
 * send calls (ucp_am_send_nbx: our plugin; ucp_tag_send_nbx: MPICH) and ucp_worker_progress,
 * takes a time stamp (rdtsc) at each, and at exit prints per rank the mean of
 *   flight:  sender's UCP send call entered -> receiver's ucp_worker_progress returns with the
 *            message handled (send call, transfer, the receiver noticing it, UCX's and the
 *            MPI library's receive callback). The sender's stamp crosses to the receiver
 *            through a shared page (/dev/shm/ucx_probe.<uid>); the TSC is the same on both.
 *   recv:    that return -> the application's next MPI_Send (the receive completes in the MPI
 *            library, MPI_Recv returns)
 *   send:    MPI_Send entered -> UCP send call entered (the MPI library's send path)
 *   call:    the UCP send call itself
 * Each stamp costs ~10 ns (rdtsc on an AMD EPYC VM), so the segments read high; compare
 * MPIs under the same probe, not with the plain benchmark.
 *
 *   gcc -O2 -shared -fPIC -I install/include -o _build/bench/ucx_probe.so test/bench/ucx_probe.c
 *   PSP_SHM=0 PSP_TCP=0 UCX_TLS=posix,cma,self install/bin/mpiexec -n 2 \
 *       -env LD_PRELOAD $PWD/_build/bench/ucx_probe.so _build/bench/mpi_pp.ours --mode lat \
 *       --sizes 8 --iters 200000
 *   mpiexec.mpich -n 2 -genv UCX_TLS posix,cma,self -genv LD_PRELOAD ... mpi_pp.mpich ...
 *
 * x86-64 only; ranks 0 and 1 of a 2-rank job (PMI_RANK or OMPI_COMM_WORLD_RANK).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

typedef unsigned (*progress_fn)(void *);
typedef void *(*am_send_fn)(void *, unsigned, const void *, size_t, const void *, size_t,
                            const void *);
typedef void *(*tag_send_fn)(void *, const void *, size_t, unsigned long, const void *);

#define SLOT_STRIDE 8         /* 64 bytes: one cache line per rank's stamp */
#define MAX_FLIGHT  100000ULL /* cycles; longer is a rank that was not waiting */

static volatile unsigned long long *slots; /* the ranks' send stamps, shared */
static int me = -1;
static unsigned long long t_handled, t_send, t_call, t_start;
static unsigned long long sum_flight, n_flight, sum_recv, sum_send, sum_call, n_calls, n_msgs;
static struct timespec ts_start;

static void *ucp_sym(const char *name)
{
    void *lib = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    void *f = lib ? dlsym(lib, name) : NULL;
    if (!f) {
        fprintf(stderr, "ucx_probe: %s not found (is libucp loaded?)\n", name);
        abort();
    }
    return f;
}

static void setup(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/shm/ucx_probe.%u", (unsigned)getuid());
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("ucx_probe: shared page");
        abort();
    }
    slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    const char *r = getenv("PMI_RANK");
    if (!r)
        r = getenv("OMPI_COMM_WORLD_RANK");
    me = r ? atoi(r) : 0;
    if (me > 1 || slots == MAP_FAILED)
        slots = NULL; /* only ranks 0 and 1 ping-pong */
    t_start = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &ts_start);
}

unsigned ucp_worker_progress(void *worker)
{
    static progress_fn real;
    if (!real)
        real = (progress_fn)ucp_sym("ucp_worker_progress");
    unsigned n = real(worker);
    if (n && slots) {
        t_handled = __rdtsc();
        unsigned long long sent = slots[(1 - me) * SLOT_STRIDE];
        if (sent && t_handled > sent && t_handled - sent < MAX_FLIGHT) {
            sum_flight += t_handled - sent;
            n_flight++;
        }
    }
    return n;
}

static void send_entered(void)
{
    t_call = __rdtsc();
    if (slots)
        slots[me * SLOT_STRIDE] = t_call;
}

void *ucp_am_send_nbx(void *ep, unsigned id, const void *hdr, size_t hlen, const void *buf,
                      size_t len, const void *param)
{
    static am_send_fn real;
    if (!real)
        real = (am_send_fn)ucp_sym("ucp_am_send_nbx");
    send_entered();
    void *r = real(ep, id, hdr, hlen, buf, len, param);
    sum_call += __rdtsc() - t_call;
    n_calls++;
    return r;
}

void *ucp_tag_send_nbx(void *ep, const void *buf, size_t len, unsigned long tag, const void *param)
{
    static tag_send_fn real;
    if (!real)
        real = (tag_send_fn)ucp_sym("ucp_tag_send_nbx");
    send_entered();
    void *r = real(ep, buf, len, tag, param);
    sum_call += __rdtsc() - t_call;
    n_calls++;
    return r;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    t_send = __rdtsc();
    if (me < 0)
        setup();
    int handled = t_handled != 0;
    if (handled) {
        sum_recv += t_send - t_handled;
        n_msgs++;
    }
    t_call = 0;
    int r = PMPI_Send(buf, count, type, dest, tag, comm);
    if (handled && t_call)
        sum_send += t_call - t_send;
    t_handled = 0;
    return r;
}

__attribute__((destructor)) static void report(void)
{
    if (!n_msgs || !n_flight)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double ns = (ts.tv_sec - ts_start.tv_sec) * 1e9 + (ts.tv_nsec - ts_start.tv_nsec);
    double ghz = (__rdtsc() - t_start) / ns;
    fprintf(stderr,
            "ucx_probe rank %d (%llu messages): flight %.1f | recv %.1f | send %.1f | "
            "(call %.1f) ns\n",
            me, n_msgs, sum_flight / ghz / n_flight, sum_recv / ghz / n_msgs,
            sum_send / ghz / n_msgs, sum_call / ghz / n_calls);
}
