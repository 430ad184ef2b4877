/* Thin wrapper of the OS socket calls the tcp transport uses. */
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tcp_socket.h"

void tcp_socket_tune(int fd, int nodelay, size_t sndbuf, size_t rcvbuf)
{
    int v = nodelay ? 1 : 0;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v));
    if (sndbuf) {
        v = (int)sndbuf;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
    }
    if (rcvbuf) {
        v = (int)rcvbuf;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
    }
}

int tcp_socket_congestion(int fd, const char *name)
{
    return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
}

ssize_t tcp_socket_writev(int fd, const struct iovec *iov, int cnt)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
    for (;;) {
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EWOULDBLOCK)
            errno = EAGAIN;
        return n;
    }
}

ssize_t tcp_socket_read(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EWOULDBLOCK)
            errno = EAGAIN;
        return n;
    }
}

void tcp_socket_close(int fd)
{
    char junk[4096];
    shutdown(fd, SHUT_WR);
    /* unread data would make close() send a reset that can destroy what the peer has not
       read yet: drain what is there */
    while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
        ;
    close(fd);
}
