/* Sockets: listening endpoints that own connections and the ANY-source queues. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "pscom_priv.h"

PSCOM_API pscom_socket_t *pscom_open_socket(size_t userdata_size, size_t con_userdata_size)
{
    pscom_sock_t *sock = calloc(1, sizeof(*sock) + userdata_size);
    if (!sock)
        return NULL;
    pscom_lock();
    sock->magic = SOCK_MAGIC;
    list_init(&sock->cons);
    list_init(&sock->recvq_any);
    list_init(&sock->genq_any);
    list_init(&sock->precons);
    sock->listen_fd = -1;
    sock->pub.listen_portno = -1;
    if (pscom_random_bytes(sock->key, sizeof(sock->key)) != 0)
        pscom_fatal("pscom_open_socket: no random bytes for the socket's key: %s", strerror(errno));
    sock->pub.userdata_size = userdata_size;
    sock->pub.userdata = userdata_size ? (void *)(sock + 1) : NULL;
    sock->con_userdata_size = con_userdata_size;
    list_add_tail(&sock->next, &pscom_global.sockets);
    pscom_unlock();
    return &sock->pub;
}

static void update_ep(pscom_sock_t *sock)
{
    if (sock->listen_fd < 0) {
        sock->ep[0] = sock->addr[0] = '\0';
        return;
    }
    char ip[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = sock->bind_ip ? sock->bind_ip : (in_addr_t)pscom_global.ip};
    inet_ntop(AF_INET, &a, ip, sizeof(ip));
    snprintf(sock->addr, sizeof(sock->addr), "%s:%d", ip, sock->pub.listen_portno);
    char hex[2 * PSCOM_SOCK_KEY_LEN + 1];
    pscom_key_hex(sock->key, hex);
    snprintf(sock->ep, sizeof(sock->ep), "%s@%s#%s", sock->addr, sock->pub.local_name, hex);
}

PSCOM_API void pscom_socket_seal(pscom_socket_t *socket)
{
    pscom_lock();
    get_sock(socket)->sealed = 1;
    pscom_unlock();
}

PSCOM_API void pscom_socket_set_name(pscom_socket_t *socket, const char *name)
{
    pscom_sock_t *sock = get_sock(socket);
    pscom_lock();
    size_t i = 0;
    /* keep names printable and free of the ep separators */
    for (; name && name[i] && i < PSCOM_NAME_MAX - 1; i++)
        socket->local_name[i] =
            (name[i] == '@' || name[i] == ':' || name[i] == '#' || name[i] <= ' ') ? '_' : name[i];
    socket->local_name[i] = '\0';
    pscom_log_set_name(socket->local_name);
    update_ep(sock);
    pscom_unlock();
}

static void listen_handler(pscom_ufd_t *ufd, uint32_t revents)
{
    pscom_sock_t *sock = ufd->priv;
    (void)revents;
    for (;;) {
        int fd = accept4(sock->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                PSCOM_LOG(2, "accept on %s: %s", sock->ep, strerror(errno));
            return;
        }
        socket_fd_watch_peer(fd);
        pscom_precon_accept(sock, fd);
    }
}

static pscom_err_t listen_at(pscom_sock_t *sock, uint32_t ip, int portno)
{
    if (sock->listen_fd >= 0)
        return PSCOM_ERR_ALREADY;
    int fd = ip ? socket_fd_listen_at(ip, portno) : socket_fd_listen(portno);
    if (fd < 0)
        return PSCOM_ERR_STDERROR;
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    sock->listen_fd = fd;
    sock->bind_ip = ip;
    sock->pub.listen_portno = ntohs(sa.sin_port);
    sock->listen_ufd =
        (pscom_ufd_t){.fd = fd, .events = EPOLLIN, .handler = listen_handler, .priv = sock};
    pscom_ufd_add(&sock->listen_ufd);
    update_ep(sock);
    return PSCOM_SUCCESS;
}

PSCOM_API pscom_err_t pscom_listen(pscom_socket_t *socket, int portno)
{
    pscom_lock();
    pscom_err_t ret = listen_at(get_sock(socket), 0, portno);
    int e = errno;
    pscom_unlock();
    errno = e;
    return ret;
}

PSCOM_API pscom_err_t pscom_listen_addr(pscom_socket_t *socket, const char *addr)
{
    /* "a.b.c.d:port", port 0 for any */
    char ip[INET_ADDRSTRLEN + 1];
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    struct in_addr a;
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || (size_t)(colon - addr) >= sizeof(ip) || end == colon + 1 || *end || port < 0 ||
        port > 65535) {
        pscom_log(1, "pscom_listen_addr: '%s' is not ip:port", addr ? addr : "(null)");
        return PSCOM_ERR_INVALID;
    }
    snprintf(ip, sizeof(ip), "%.*s", (int)(colon - addr), addr);
    if (inet_pton(AF_INET, ip, &a) != 1 || a.s_addr == 0) {
        pscom_log(1, "pscom_listen_addr: '%s' is not ip:port", addr);
        return PSCOM_ERR_INVALID;
    }
    pscom_lock();
    pscom_err_t ret = listen_at(get_sock(socket), a.s_addr, port ? (int)port : -1);
    int e = errno;
    pscom_unlock();
    errno = e;
    return ret;
}

PSCOM_API void pscom_socket_set_service(pscom_socket_t *socket, const char *service)
{
    pscom_sock_t *sock = get_sock(socket);
    pscom_lock();
    snprintf(sock->service, sizeof(sock->service), "%s", service ? service : "");
    pscom_unlock();
}

PSCOM_API void pscom_socket_serve(pscom_socket_t *socket, const char *service)
{
    pscom_sock_t *sock = get_sock(socket);
    pscom_lock();
    snprintf(sock->serves, sizeof(sock->serves), "%s", service ? service : "");
    pscom_unlock();
}

/* the socket whose field at offset (serves, addr) equals key */
static pscom_sock_t *sock_with(size_t offset, const char *key)
{
    list_head_t *p;
    list_for_each(p, &pscom_global.sockets)
    {
        pscom_sock_t *sock = list_entry(p, pscom_sock_t, next);
        const char *v = (const char *)sock + offset;
        if (v[0] && !strcmp(v, key))
            return sock;
    }
    return NULL;
}

pscom_sock_t *pscom_sock_serving(const char *service)
{
    return sock_with(offsetof(pscom_sock_t, serves), service);
}

pscom_sock_t *pscom_sock_by_addr(const char *addr)
{
    return sock_with(offsetof(pscom_sock_t, addr), addr);
}

static void stop_listen(pscom_sock_t *sock)
{
    if (sock->listen_fd < 0)
        return;
    pscom_ufd_del(&sock->listen_ufd);
    close(sock->listen_fd);
    sock->listen_fd = -1;
    sock->pub.listen_portno = -1;
    update_ep(sock);
}

PSCOM_API void pscom_stop_listen(pscom_socket_t *socket)
{
    pscom_lock();
    stop_listen(get_sock(socket));
    pscom_unlock();
}

PSCOM_API const char *pscom_socket_get_ep_str(pscom_socket_t *socket)
{
    pscom_sock_t *sock = get_sock(socket);
    return sock->ep[0] ? sock->ep : NULL;
}

void pscom_sock_close(pscom_sock_t *sock)
{
    stop_listen(sock);
    while (!list_empty(&sock->precons)) {
        list_head_t *p = sock->precons.next;
        list_del(p);
        pscom_precon_destroy((precon_t *)p); /* the list link is the precon's first member */
    }
    while (!list_empty(&sock->cons)) {
        pscom_con_t *con = list_entry(sock->cons.next, pscom_con_t, next);
        pscom_close_connection(&con->pub);
    }
    list_del(&sock->next);
    pscom_tag_sock_closed(sock);
    sock->magic = 0;
    free(sock);
}

PSCOM_API void pscom_close_socket(pscom_socket_t *socket)
{
    pscom_lock();
    if (!socket) {
        while (!list_empty(&pscom_global.sockets))
            pscom_sock_close(list_entry(pscom_global.sockets.next, pscom_sock_t, next));
    } else {
        pscom_sock_close(get_sock(socket));
    }
    pscom_unlock();
}

PSCOM_API pscom_connection_t *pscom_get_next_connection(pscom_socket_t *socket,
                                                        pscom_connection_t *con)
{
    pscom_sock_t *sock = get_sock(socket);
    list_head_t *n = con ? get_con(con)->next.next : sock->cons.next;
    return n == &sock->cons ? NULL : &list_entry(n, pscom_con_t, next)->pub;
}
