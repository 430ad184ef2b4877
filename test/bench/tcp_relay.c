/*
 * tcp_relay: the floor of any user-space gateway on this machine. Accepts TCP connections on
 * LISTEN and joins each to a new connection to TARGET, copying bytes both ways with read and
 * write (what a forwarding process must do at least: two kernel copies per byte).
 *   tcp_relay LISTEN_IP:PORT TARGET_IP:PORT
 * test/bench/gateway.sh puts pscom_pp's tcp traffic through it beside psgwd's.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *s, struct sockaddr_in *sa)
{
    char ip[64];
    snprintf(ip, sizeof(ip), "%s", s);
    char *colon = strrchr(ip, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((unsigned short)atoi(colon + 1));
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static void relay(int a, int b)
{
    static char buf[1 << 20];
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0)
            return;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof(buf));
            if (n <= 0)
                return;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(p[1 - i].fd, buf + off, (size_t)(n - off));
                if (w <= 0)
                    return;
                off += w;
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_in l, t;
    if (argc != 3 || parse(argv[1], &l) || parse(argv[2], &t)) {
        fprintf(stderr, "usage: tcp_relay LISTEN_IP:PORT TARGET_IP:PORT\n");
        return 2;
    }
    signal(SIGCHLD, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, (struct sockaddr *)&l, sizeof(l)) || listen(ls, 16)) {
        perror("tcp_relay: listen");
        return 1;
    }
    printf("relay %s -> %s\n", argv[1], argv[2]);
    fflush(stdout);
    for (;;) {
        int a = accept(ls, NULL, NULL);
        if (a < 0)
            continue;
        if (fork() == 0) {
            int b = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(b, (struct sockaddr *)&t, sizeof(t)))
                _exit(1);
            setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            relay(a, b);
            _exit(0);
        }
        close(a);
    }
}
