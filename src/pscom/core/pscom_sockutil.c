/* Small TCP helpers shared by the listener and the handshake. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "pscom_priv.h"

int socket_fd_listen(int portno)
{
    return socket_fd_listen_at(htonl(INADDR_ANY), portno);
}

int socket_fd_listen_at(uint32_t ip, int portno)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* a daemon's worker processes share its address (pscom_listen_addr: psgwd --threads) */
    if (ip != htonl(INADDR_ANY))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = ip};
    sa.sin_port = htons(portno < 0 ? 0 : (uint16_t)portno);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Start a non-blocking connect to "ip:port". Returns the fd (connect may be in progress). */
int socket_fd_connect(const char *addr)
{
    char host[64];
    snprintf(host, sizeof(host), "%s", addr);
    char *colon = strrchr(host, ':');
    if (!colon) {
        errno = EINVAL;
        return -1;
    }
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    socket_fd_watch_peer(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* "ip:port" of the other end of a connected socket, for log lines. */
void socket_fd_peer_str(int fd, char *buf, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    char ip[INET_ADDRSTRLEN] = "?";
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET) {
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%d", ip, ntohs(sa.sin_port));
    } else {
        snprintf(buf, len, "unknown peer");
    }
}

/* PSP_PEER_TIMEOUT: a peer node that vanished without closing its sockets (power, link) is
 * noticed within the timeout also when nothing is in flight to it: keepalive probes from half
 * of it on, TCP_USER_TIMEOUT for probes and data left unanswered. A stopped process's kernel
 * still answers both, so a slow peer is never given up. */
void socket_fd_watch_peer(int fd)
{
    unsigned t = pscom_config.peer_timeout_ms;
    if (!t)
        return;
    int on = 1, idle = (int)(t / 2000), intvl = (int)(t / 10000), cnt = 5;
    unsigned user_timeout = t;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}
