/* The one instance of the ch4:pscom netmod's global state. */
#include "mpidimpl.h" /* first: it pulls in our inline headers, which need pscom_impl.h */
#include "pscom_impl.h"

MPIDI_PSCOM_global_t MPIDI_PSCOM_global;
