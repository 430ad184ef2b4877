/*
 * A connection broke (pscom_con.c): what the netmod's own blocking paths need of it.
 */
#ifndef PSCOM_BROKEN_H_INCLUDED
#define PSCOM_BROKEN_H_INCLUDED

/* Progress for the grace that lets the launcher report a dead peer first (at most a second,
 * PSP_MPI_LOST_PEER_ABORT), before an operation that failed on a broken connection returns. */
void MPIDI_PSCOM_broken_wait(void);

#endif /* PSCOM_BROKEN_H_INCLUDED */
