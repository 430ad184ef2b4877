/* gw_route.h - which gateway a connection to a peer takes (PSP_GW_SERVER route file). */
#ifndef GW_ROUTE_H_INCLUDED
#define GW_ROUTE_H_INCLUDED

#include <stddef.h>

#define GW_ADDR_MAX 64

/* Read the route file. Lines: "# comment", "key PATH" (the job's key file, when PSP_GW_KEY is
   not set) and "ADDR[,ADDR...] PATTERN_A PATTERN_B": the gateway (one psgwd, by its address on
   each network it listens on) for connections between a node matching one pattern and a node
   matching the other. 0, or -1 with why (a malformed line names file and line). */
int gw_routes_load(const char *path, char *key_path, size_t key_len, char *why, size_t whylen);
void gw_routes_free(void);
int gw_routes_count(void);

/* The gateway address for a connection to the peer listening at peer_ip: from the lines whose
   patterns match this node and the peer's node; with none and unreachable set (a direct attempt
   failed), from all gateways of the file. Several candidates: number (i + j) mod n, i and j the
   numbers that end the two nodes' names (else the last byte of their addresses). Of a gateway's
   addresses, the one on a network of this node. NULL: no gateway for this peer. */
const char *gw_route_pick(const char *peer_ip, int unreachable, char *out, size_t outlen);

/* Of a gateway's addresses ("ip:port,ip:port"), the one on a network of this node */
const char *gw_route_local_addr(const char *list, char *out, size_t outlen);

#endif
