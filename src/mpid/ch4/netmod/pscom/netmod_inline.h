/*
 * The inline half of the ch4:pscom netmod, included by ch4 through netmod_impl.h when
 * NETMOD_INLINE == __netmod_inline_pscom__ (maint/patches/0001).
 *
 * Point-to-point is native: pscom matches it (or UCX, PSP_UCP_TAG). It never goes over MPIDIG
 * active messages: that path would need tests of its own, and MPICH's --enable-ch4-am-only
 * is refused below instead of building an untested configuration.
 * RMA, partitioned communication and collectives use MPICH's generic code
 * (MPIDIG over our active messages, MPIR collectives over our point-to-point); with
 * PSP_MSA_AWARE_COLLOPS=1 some collectives are hierarchical (pscom_coll.h).
 */
#ifndef NETMOD_INLINE_H_INCLUDED
#define NETMOD_INLINE_H_INCLUDED

#include "pscom_progress.h"
#include "pscom_am.h"
#include "pscom_request.h"
#include "pscom_proc.h"
#ifdef MPIDI_ENABLE_AM_ONLY
#error "ch4:pscom carries point-to-point itself: configure MPICH without --enable-ch4-am-only"
#endif
#include "pscom_send.h"
#include "pscom_recv.h"
#include "pscom_probe.h"
#include "pscom_rma.h"  /* MPIDIG, or psnamd for a PSNAM nam window */
#include "pscom_coll.h" /* MPICH's collectives, some MSA-aware (pscom_coll_msa.c) */
#include "netmod_am_fallback_part.h"
#include "pscom_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
