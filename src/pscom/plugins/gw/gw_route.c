/* Route file and gateway choice (gw_route.h). */
#include "gw_route.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADDRS_MAX 4

typedef struct route {
    char addr[ADDRS_MAX][GW_ADDR_MAX]; /* one psgwd, by its address on each of its networks */
    int n_addr;
    char pat[2][128];
} route_t;

static route_t *routes;
static int n_routes;

int gw_routes_count(void)
{
    return n_routes;
}

void gw_routes_free(void)
{
    free(routes);
    routes = NULL;
    n_routes = 0;
}

static int valid_addr(const char *a)
{
    char ip[GW_ADDR_MAX];
    snprintf(ip, sizeof(ip), "%s", a);
    char *colon = strrchr(ip, ':');
    if (!colon)
        return 0;
    *colon = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    struct in_addr x;
    return inet_pton(AF_INET, ip, &x) == 1 && !*end && port > 0 && port < 65536;
}

static int parse_line(char *line, route_t *r, char *key_path, size_t key_len, char *why,
                      size_t whylen)
{
    char *w[4], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == 4) {
            snprintf(why, whylen, "more than three words");
            return -1;
        }
        w[n++] = t;
    }
    if (n == 0)
        return 1; /* blank */
    if (!strcmp(w[0], "key")) {
        if (n != 2) {
            snprintf(why, whylen, "want 'key PATH'");
            return -1;
        }
        snprintf(key_path, key_len, "%s", w[1]);
        return 1;
    }
    if (n != 3) {
        snprintf(why, whylen, "want 'ADDR:PORT[,ADDR:PORT] NODE-PATTERN NODE-PATTERN'");
        return -1;
    }
    memset(r, 0, sizeof(*r));
    char *asave = NULL;
    for (char *a = strtok_r(w[0], ",", &asave); a; a = strtok_r(NULL, ",", &asave)) {
        if (!valid_addr(a) || strlen(a) >= GW_ADDR_MAX || r->n_addr == ADDRS_MAX) {
            snprintf(why, whylen, "'%s' is not an ip:port gateway address", a);
            return -1;
        }
        snprintf(r->addr[r->n_addr++], GW_ADDR_MAX, "%s", a);
    }
    snprintf(r->pat[0], sizeof(r->pat[0]), "%s", w[1]);
    snprintf(r->pat[1], sizeof(r->pat[1]), "%s", w[2]);
    return 0;
}

int gw_routes_load(const char *path, char *key_path, size_t key_len, char *why, size_t whylen)
{
    gw_routes_free();
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024], lwhy[160];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        route_t r;
        int rc = parse_line(line, &r, key_path, key_len, lwhy, sizeof(lwhy));
        if (rc < 0) {
            snprintf(why, whylen, "%s:%d: %s", path, lineno, lwhy);
            fclose(f);
            gw_routes_free();
            return -1;
        }
        if (rc > 0)
            continue;
        route_t *nr = realloc(routes, (size_t)(n_routes + 1) * sizeof(*routes));
        if (!nr) {
            snprintf(why, whylen, "out of memory");
            fclose(f);
            return -1;
        }
        routes = nr;
        routes[n_routes++] = r;
    }
    fclose(f);
    return 0;
}

/* ---- node identities: names and addresses a pattern may match ---- */

typedef struct ident {
    char names[6][128];
    int n;
    int index; /* trailing number of the name, else last address byte */
} ident_t;

static void add_name(ident_t *id, const char *name)
{
    if (!name[0] || id->n == 6)
        return;
    snprintf(id->names[id->n++], sizeof(id->names[0]), "%s", name);
    const char *dot = strchr(name, '.');
    if (dot && id->n < 6) /* the short form of a fully qualified name */
        snprintf(id->names[id->n++], sizeof(id->names[0]), "%.*s", (int)(dot - name), name);
}

static int trailing_number(const char *s)
{
    const char *dot = strchr(s, '.');
    const char *end = dot ? dot : s + strlen(s), *p = end;
    while (p > s && isdigit((unsigned char)p[-1]))
        p--;
    return p < end ? atoi(p) : -1;
}

static int last_byte(const char *ip)
{
    const char *dot = strrchr(ip, '.');
    return dot ? atoi(dot + 1) : 0;
}

static void peer_ident(const char *ip, ident_t *id)
{
    memset(id, 0, sizeof(*id));
    add_name(id, ip);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char host[128] = "";
    if (inet_pton(AF_INET, ip, &sa.sin_addr) == 1 &&
        getnameinfo((struct sockaddr *)&sa, sizeof(sa), host, sizeof(host), NULL, 0, NI_NAMEREQD) ==
            0)
        add_name(id, host);
    id->index = host[0] && trailing_number(host) >= 0 ? trailing_number(host) : last_byte(ip);
}

static void self_ident(ident_t *id)
{
    memset(id, 0, sizeof(*id));
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    add_name(id, host);
    struct ifaddrs *ifs = NULL;
    char first_ip[INET_ADDRSTRLEN] = "";
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                continue;
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof(ip));
            if (!strncmp(ip, "127.", 4))
                continue;
            add_name(id, ip);
            if (!first_ip[0])
                snprintf(first_ip, sizeof(first_ip), "%s", ip);
        }
        freeifaddrs(ifs);
    }
    id->index = trailing_number(host) >= 0 ? trailing_number(host) : last_byte(first_ip);
}

static int matches(const char *pattern, const ident_t *id)
{
    for (int i = 0; i < id->n; i++)
        if (fnmatch(pattern, id->names[i], 0) == 0)
            return 1;
    return 0;
}

/* the gateway's address on a network of this node, else its first */
static const char *local_addr(const route_t *r)
{
    struct ifaddrs *ifs = NULL;
    const char *best = r->addr[0];
    if (getifaddrs(&ifs) != 0)
        return best;
    for (int k = 0; k < r->n_addr; k++) {
        char ip[GW_ADDR_MAX];
        snprintf(ip, sizeof(ip), "%s", r->addr[k]);
        *strrchr(ip, ':') = '\0';
        struct in_addr a;
        inet_pton(AF_INET, ip, &a);
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask)
                continue;
            uint32_t mine = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            uint32_t mask = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
            if ((mine & mask) == (a.s_addr & mask) && !(ntohl(mine) >> 24 == 127)) {
                freeifaddrs(ifs);
                return r->addr[k];
            }
        }
    }
    freeifaddrs(ifs);
    return best;
}

static int same_gateway(const route_t *a, const route_t *b)
{
    return a->n_addr == b->n_addr && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

const char *gw_route_pick(const char *peer_ip, int unreachable, char *out, size_t outlen)
{
    if (!n_routes)
        return NULL;
    ident_t self, peer;
    self_ident(&self);
    peer_ident(peer_ip, &peer);
    const route_t *cand[64];
    int n = 0;
    for (int pass = 0; pass < 2 && !n; pass++) {
        if (pass == 1 && !unreachable)
            break;
        for (int i = 0; i < n_routes && n < 64; i++) {
            const route_t *r = &routes[i];
            int fit = pass == 1 || (matches(r->pat[0], &self) && matches(r->pat[1], &peer)) ||
                      (matches(r->pat[1], &self) && matches(r->pat[0], &peer));
            int dup = 0;
            for (int k = 0; k < n && !dup; k++)
                dup = same_gateway(cand[k], r);
            if (fit && !dup)
                cand[n++] = r;
        }
    }
    if (!n)
        return NULL;
    const route_t *r = cand[(unsigned)(self.index + peer.index) % (unsigned)n];
    snprintf(out, outlen, "%s", local_addr(r));
    return out;
}

const char *gw_route_local_addr(const char *list, char *out, size_t outlen)
{
    route_t r;
    char buf[256], *save = NULL;
    memset(&r, 0, sizeof(r));
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *a = strtok_r(buf, ",", &save); a && r.n_addr < ADDRS_MAX;
         a = strtok_r(NULL, ",", &save))
        if (valid_addr(a))
            snprintf(r.addr[r.n_addr++], GW_ADDR_MAX, "%s", a);
    if (!r.n_addr)
        return NULL;
    snprintf(out, outlen, "%s", local_addr(&r));
    return out;
}
