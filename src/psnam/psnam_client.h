/*
 * psnam_client.h - the client end of the psnamd protocol (psnam_proto.h), shared by the
 * ch4:pscom netmod's nam windows and the psnam tool.
 *
 * Requests are asynchronous: psnam_post sends one and calls done once its reply came (and its
 * data left), from inside pscom_progress. Reply data goes straight into the caller's result
 * buffer. A broken connection, or a server that does not answer for the client's timeout
 * (psnam_check), completes every pending request with PSNAM_E_LOST.
 */
#ifndef PSNAM_CLIENT_H_INCLUDED
#define PSNAM_CLIENT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "psnam_proto.h"

typedef struct psnam_client psnam_client_t;

/* status: PSNAM_OK or PSNAM_E_*; reason: psnamd's words (or ours) on an error; len: reply
   data bytes (in the result buffer on success) */
typedef void (*psnam_done_t)(void *user, int status, const char *reason, size_t len);

/* Connect to psnamd at "host:port" (host: a name or an address) and wait for its greeting.
   timeout_s bounds the connect and, later, how long a request may wait for its reply. NULL
   with a reason in why. Clients to the same server are shared (reference counted). */
psnam_client_t *psnam_connect(const char *server, int timeout_s, char *why, size_t whylen);
void psnam_disconnect(psnam_client_t *c);

/* The nonce proofs on this connection are bound to */
const uint8_t *psnam_nonce(psnam_client_t *c);
/* The server as given to psnam_connect */
const char *psnam_server(psnam_client_t *c);

/* Post request m (type, region, seg, offset, len, op, dtype, arg; id and version are set here)
   with len bytes of data (kept by the caller until done runs). Blocks in pscom_progress while
   more than the in-flight limit is outstanding. 0, or -1 if the connection is gone (done is
   then called before this returns). */
int psnam_post(psnam_client_t *c, const psnam_msg_t *m, const void *data, size_t len, void *result,
               size_t result_len, psnam_done_t done, void *user);

/* Requests not yet answered; psnam_check fails them all (PSNAM_E_LOST) when the oldest has
   waited longer than the timeout. Call it from wait loops. */
unsigned psnam_pending(psnam_client_t *c);
void psnam_check(psnam_client_t *c);

/* Post and wait (the tool, window creation): status; the reply's handle (region) and arg in
 *reply if given; an error's reason in why */
int psnam_call(psnam_client_t *c, const psnam_msg_t *m, const void *data, size_t len, void *result,
               size_t result_len, size_t *got, psnam_msg_t *reply, char *why, size_t whylen);

/* The user's owner verifier V from the key file (PSP_NAM_KEY or ~/.psnam.key), creating the
   key file (mode 0600) if it does not exist. 0, or -1 with a reason. */
int psnam_verifier(const char *key_file, uint8_t v[PSNAM_MAC_LEN], char *why, size_t whylen);

#endif /* PSNAM_CLIENT_H_INCLUDED */
