/*
 * psnamd_serve.h - what psnamd serves: regions (in anonymous memory, or mapped --backing
 * files), the clients and their requests (psnam_proto.h), applied one at a time. psnamd.c is
 * the daemon around it (options, start-up, the progress loop); test/fuzz/fuzz_psnamd.c sends
 * it requests of its own.
 */
#ifndef PSNAMD_SERVE_H_INCLUDED
#define PSNAMD_SERVE_H_INCLUDED

#include <stdint.h>
#include <stdio.h>

#include "pscom.h"

/* psnamd's log line (to stderr, which the daemon points at its --log file, or to out) */
void psnamd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void psnamd_log_to(FILE *out);

/* Regions may take memory bytes in all; backing: the directory of the region files, or NULL
   (regions in memory only). With backing, the persistent regions found there are served. */
void psnamd_serve_init(uint64_t memory, const char *backing);
/* A socket whose connections are clients (its ops are set; the caller names it, listens) */
pscom_socket_t *psnamd_serve_socket(void);
/* From the progress loop, outside pscom's callbacks: clients that went away or sent garbage
   are closed */
void psnamd_serve_poll(void);
/* Bytes of the regions served now */
uint64_t psnamd_serve_used(void);
/* The end: backing files are synced (and stay), the regions' memory goes; why (or NULL: no
   line) is logged with what was served */
void psnamd_serve_end(const char *why);

#endif /* PSNAMD_SERVE_H_INCLUDED */
