/*
 * tcp_pp: ping-pong of large messages over a plain loopback TCP socket pair, without any MPI or
 * pscom, to tell the kernel's share of a tcp transport's large-message latency from ours.
 *
 *   gcc -O2 -o _build/bench/tcp_pp test/bench/tcp_pp.c
 *   _build/bench/tcp_pp BYTES MODE [ITERATIONS [HEADER [OFFSET]]]   (default 200, 0, 0)
 *
 * MODE 0: the message alone, both ways in turn (an eager protocol).
 * MODE 1: before each message the receiver sends the sender 16 bytes.
 * MODE 2: before each message the sender sends 16 bytes and the receiver answers 16 bytes (what
 *         a rendezvous handshake does). Prints the one-way time per message.
 * HEADER: bytes written in front of each message in the same sendmsg (and read on their own by
 * the receiver), as a transport's header; OFFSET: where the message lies after a page
 * boundary. The kernel copies a write into its socket buffer at the write's offset, and on
 * some CPUs that copy is far slower into a destination off a 64-byte boundary (tcp plugin).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* busy-polling non-blocking I/O, as the MPIs poll */
static void put(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t w = send(fd, b, n, MSG_DONTWAIT);
        if (w < 0 && errno == EAGAIN)
            continue;
        if (w < 0)
            die("send");
        b += w;
        n -= (size_t)w;
    }
}

static size_t hdr_len; /* HEADER */

/* the message behind hdr_len header bytes, in one sendmsg (then the rest) */
static void put_msg(int fd, char *b, size_t n)
{
    static char hdr[4096];
    struct iovec iov[2] = {{hdr, hdr_len}, {b, n}};
    struct msghdr m = {.msg_iov = hdr_len ? iov : iov + 1, .msg_iovlen = hdr_len ? 2 : 1};
    size_t left = hdr_len + n;
    while (left) {
        ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT);
        if (w < 0 && errno == EAGAIN)
            continue;
        if (w < 0)
            die("sendmsg");
        left -= (size_t)w;
        while (w > 0) {
            size_t k = (size_t)w < m.msg_iov->iov_len ? (size_t)w : m.msg_iov->iov_len;
            m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + k;
            m.msg_iov->iov_len -= k;
            w -= (ssize_t)k;
            if (!m.msg_iov->iov_len) {
                m.msg_iov++;
                m.msg_iovlen--;
            }
        }
    }
}

static void get(int fd, char *b, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN)
            continue;
        if (r <= 0)
            die("recv");
        b += r;
        n -= (size_t)r;
    }
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5); /* as pscom's tcp (not BBR) */
}

/* What precedes a message: nothing (mode 0), 16 bytes from the receiver (1), or 16 bytes from
   the sender answered by 16 from the receiver (2). */
static void before(int fd, int mode, int sending, char *tok)
{
    for (int step = mode == 2 ? 0 : 1; step < 2 && mode; step++) {
        if ((step == 0) == (sending != 0))
            put(fd, tok, 16); /* step 0: the sender's 16 bytes; step 1: the receiver's */
        else
            get(fd, tok, 16);
    }
}

static void take(int fd, int mode, char *buf, size_t n, char *tok)
{
    static char hdr[4096];
    before(fd, mode, 0, tok);
    get(fd, hdr, hdr_len);
    get(fd, buf, n);
}

static void give(int fd, int mode, char *buf, size_t n, char *tok)
{
    before(fd, mode, 1, tok);
    put_msg(fd, buf, n);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s BYTES MODE(0|1|2) [ITERATIONS [HEADER [OFFSET]]]\n", argv[0]);
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 0);
    int mode = atoi(argv[2]);
    int iters = argc > 3 ? atoi(argv[3]) : 200;
    hdr_len = argc > 4 ? strtoul(argv[4], NULL, 0) : 0;
    size_t offset = argc > 5 ? strtoul(argv[5], NULL, 0) : 0;
    char *page = aligned_alloc(4096, (n + offset + 4095) / 4096 * 4096 + 4096), tok[16] = {0};
    char *buf = page + offset;
    if (!page || iters < 1 || mode < 0 || mode > 2 || hdr_len > 4096 || offset >= 4096)
        return 2;
    memset(buf, 'a', n);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (ls < 0 || bind(ls, (void *)&a, sizeof(a)) || listen(ls, 1) ||
        getsockname(ls, (void *)&a, &al))
        die("listen");
    pid_t child = fork();
    if (child == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (void *)&a, sizeof(a)))
            die("connect");
        tune(s);
        for (int i = 0; i < iters + 2; i++) {
            take(s, mode, buf, n, tok);
            give(s, mode, buf, n, tok);
        }
        return 0;
    }
    int s = accept(ls, NULL, NULL);
    if (s < 0)
        die("accept");
    tune(s);
    struct timespec t0 = {0}, t1;
    for (int i = 0; i < iters + 2; i++) {
        if (i == 2) /* two rounds of warm-up */
            clock_gettime(CLOCK_MONOTONIC, &t0);
        give(s, mode, buf, n, tok);
        take(s, mode, buf, n, tok);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waitpid(child, NULL, 0);
    double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    printf("tcp_pp: %zu bytes, mode %d, header %zu, offset %zu: one-way %.1f us\n", n, mode,
           hdr_len, offset, us / iters / 2);
    return 0;
}
