/* Thin wrapper of the OS socket calls the tcp transport uses. */
#ifndef TCP_SOCKET_H_INCLUDED
#define TCP_SOCKET_H_INCLUDED

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* TCP_NODELAY and buffer sizes (0: kernel default). */
void tcp_socket_tune(int fd, int nodelay, size_t sndbuf, size_t rcvbuf);
/* TCP_CONGESTION: 0, or -1 with errno (unknown, or not allowed for this user). */
int tcp_socket_congestion(int fd, const char *name);
/* writev/read that retry EINTR; return -1 with errno EAGAIN when they would block. */
ssize_t tcp_socket_writev(int fd, const struct iovec *iov, int cnt);
ssize_t tcp_socket_read(int fd, void *buf, size_t len);
/* Orderly close: no more sends, drop what is unread, release. */
void tcp_socket_close(int fd);

#endif
