/* AM request hooks: AM state lives in the pscom request, nothing to set up here. */
#ifndef PSCOM_REQUEST_H_INCLUDED
#define PSCOM_REQUEST_H_INCLUDED

#include "pscom_impl.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_init(MPIR_Request *req)
{
    (void)req;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_finalize(MPIR_Request *req)
{
    (void)req;
}

#endif /* PSCOM_REQUEST_H_INCLUDED */
