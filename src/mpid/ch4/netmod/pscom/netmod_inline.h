/*
 * The inline half of the ch4:pscom netmod, included by ch4 through netmod_impl.h when
 * NETMOD_INLINE == __netmod_inline_pscom__ (maint/patches/0001).
 *
 * Point-to-point is native (pscom matching) unless configured --enable-pscom-am-only or
 * --enable-ch4-am-only; then it goes over MPIDIG. Never both: their queues are separate.
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
#if defined(MPIDI_PSCOM_AM_ONLY) || defined(MPIDI_ENABLE_AM_ONLY)
#include "netmod_am_fallback_send.h"
#include "netmod_am_fallback_recv.h"
#include "netmod_am_fallback_probe.h"
#else
#include "pscom_send.h"
#include "pscom_recv.h"
#include "pscom_probe.h"
#endif
#include "netmod_am_fallback_rma.h"
#include "pscom_coll.h" /* MPICH's collectives, some MSA-aware (pscom_coll_msa.c) */
#include "netmod_am_fallback_part.h"
#include "pscom_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
