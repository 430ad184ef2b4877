/*
 * Dynamic processes (pscom_spawn.c): what finalize needs of them.
 */
#ifndef PSCOM_SPAWN_H_INCLUDED
#define PSCOM_SPAWN_H_INCLUDED

/* Free the endpoint strings of the av tables made for dynamic peers. */
void MPIDI_PSCOM_dyn_avts_finalize(void);

#endif /* PSCOM_SPAWN_H_INCLUDED */
