/*
 * fuzz_precon: the connection handshake (core/pscom_precon.c) on the accepting side. The fuzz
 * input is what a peer sends on a fresh connection to a listening pscom socket (over a
 * socketpair handed to the socket as an accepted connection), and whatever the handshake makes
 * of it runs: frames (magic, version, length), the HELLO and the connection it binds to (a new
 * one, or the one we announced with pscom_connect to 127.0.0.1:9), services (a second socket
 * serves "fz"), transport offers (tcp, loop; shm is off here: its offer names SysV segments to
 * attach) and, once a transport is agreed, the connection's first messages (tcp: the wire
 * parser). The handshake changes with the protocol; the target only delivers bytes.
 *
 * Input: a byte whose low two bits choose how the rest is written (0: at once; 1, 2, 3: in
 * pieces of up to 16, 256, 4096 bytes with a progress round after each), then the peer's bytes.
 * Seeds: a real handshake of a pscom connection (tcp) and its first messages, captured through
 * a relay, and prefixes of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "fuzz_pscom.h"

#define ROUNDS_MAX 64 /* progress rounds after the last byte */

static pscom_sock_t *sock, *serving;

static int settled(pscom_sock_t *s)
{
    if (!list_empty(&s->precons))
        return 0;
    list_head_t *p;
    list_for_each(p, &s->cons)
    {
        pscom_con_t *con = list_entry(p, pscom_con_t, next);
        if (con->precon || con->pub.state == PSCOM_CON_STATE_ACCEPTING ||
            con->pub.state == PSCOM_CON_STATE_RW)
            return 0;
    }
    return 1;
}

/* the handshakes still open and every connection of s */
static void close_all(pscom_sock_t *s)
{
    while (!list_empty(&s->precons))
        pscom_precon_destroy((precon_t *)s->precons.next);
    while (!list_empty(&s->cons))
        pscom_close_connection(&list_entry(s->cons.next, pscom_con_t, next)->pub);
}

static void write_all(int fd, const uint8_t *p, size_t len, unsigned mode, uint32_t seed)
{
    static const size_t piece_max[4] = {0, 16, 256, 4096};
    uint32_t x = seed | 1;
    while (len) {
        size_t n = len;
        if (mode) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            n = 1 + x % piece_max[mode];
            if (n > len)
                n = len;
        }
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return; /* our side was closed: the handshake gave up */
        if (w > 0) {
            p += w;
            len -= (size_t)w;
        }
        if (mode || w <= 0)
            fz_progress(1);
    }
}

static void setup(void)
{
    fz_pscom_init((const char *const[]){"PSP_SHM=0", NULL});
    sock = get_sock(pscom_open_socket(0, 0));
    pscom_socket_set_name(&sock->pub, "fz");
    if (pscom_listen_addr(&sock->pub, "127.0.0.1:0") != PSCOM_SUCCESS)
        abort();
    serving = get_sock(pscom_open_socket(0, 0));
    pscom_socket_serve(&serving->pub, "fz");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sock)
        setup();
    fz_in_t in = {data, size};
    unsigned mode = fz_u8(&in) & 3;
    /* a connection we announced: a HELLO from its address binds to it */
    pscom_connection_t *announced = pscom_open_connection(&sock->pub);
    pscom_connect(announced, "127.0.0.1:9@peer", PSCOM_CON_FLAG_ONDEMAND);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    pscom_precon_accept(sock, sv[0]); /* as if the listener had accepted it */
    write_all(sv[1], in.p, in.n, mode, (uint32_t)size);
    shutdown(sv[1], SHUT_WR);
    for (int r = 0; r < ROUNDS_MAX && !(settled(sock) && settled(serving)); r++)
        fz_progress(1);
    close(sv[1]);
    close_all(sock);
    close_all(serving);
    return 0;
}

/* ---- seeds: a real handshake, captured (fz_capture_connect) ---- */

static uint8_t cap[1 << 16];
static size_t cap_len, cuts[64];
static int n_cuts;

static void seed(const char *name, unsigned mode, size_t len)
{
    uint8_t buf[sizeof(cap) + 1];
    buf[0] = (uint8_t)mode;
    memcpy(buf + 1, cap, len);
    fz_seed(name, buf, len + 1);
}

static void write_seeds(void)
{
    cap_len = fz_capture_connect(&sock->pub, cap, sizeof(cap), cuts, &n_cuts);
    seed("handshake-tcp", 0, cap_len);
    seed("handshake-tcp-pieces16", 1, cap_len);
    seed("handshake-tcp-pieces256", 2, cap_len);
    seed("hello", 0, cuts[0]);
    seed("hello-arch", 0, cuts[1]);
    seed("hello-arch-done", 0, cuts[2]);
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    memcpy(cap, http, sizeof(http) - 1);
    seed("http", 0, sizeof(http) - 1);
    seed("empty", 0, 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!fz_seeds_dir())
        return 0;
    putenv("PSP_LOOP=0"); /* fz_capture_connect: tcp */
    setup();
    write_seeds();
    exit(0);
}
