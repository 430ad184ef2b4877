/*
 * psgwd_fwd.h - psgwd's forwarder: the carriers (pscom connections to the ranks), the tunnels
 * through them and the dispatch of the carriers' messages (gw_proto.h), with the job keys
 * ranks must prove. psgwd.c is the daemon around it (options, workers, the progress loop);
 * test/fuzz/fuzz_psgwd.c sends it messages of its own.
 */
#ifndef PSGWD_FWD_H_INCLUDED
#define PSGWD_FWD_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "pscom.h"

#define PSGWD_KEYS_MAX 16

/* psgwd's log line (to stderr, which the daemon points at its --log file, or to out) */
void psgwd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void psgwd_log_to(FILE *out);

/* A job key ranks may prove; 0, or -1 when PSGWD_KEYS_MAX are there already */
int psgwd_key_add(const uint8_t *key, size_t len);
/* A socket whose incoming connections are ranks' carriers (ops set; the caller names it and
   listens) */
pscom_socket_t *psgwd_socket(void);
/* Before the first message: the socket psgwd connects to ranks with; eps: its listen
   addresses ("ip:port,ip:port"), which OPEN passes on for the ranks' log lines. 0, or -1. */
int psgwd_start(const char *eps);
/* From the progress loop, outside pscom's callbacks: carriers that failed, were dropped, or
   did not prove a key in time are closed, their tunnels ended */
void psgwd_poll(void);
/* The end: every tunnel is closed towards both ends, every carrier closed; why (or NULL: no
   line) is logged with what was forwarded */
void psgwd_stop(const char *why);

#endif
