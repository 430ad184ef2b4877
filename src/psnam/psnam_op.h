/*
 * psnam_op.h - the element types and reduction operations psnamd applies for accumulates and
 * atomics (MPI's predefined operations on MPI's basic C types; MAXLOC/MINLOC and user
 * operations are not offered by a NAM and are refused by the client).
 */
#ifndef PSNAM_OP_H_INCLUDED
#define PSNAM_OP_H_INCLUDED

#include <stddef.h>

enum psnam_dtype {
    PSNAM_T_NONE = 0,
    PSNAM_T_I8,
    PSNAM_T_I16,
    PSNAM_T_I32,
    PSNAM_T_I64,
    PSNAM_T_U8,
    PSNAM_T_U16,
    PSNAM_T_U32,
    PSNAM_T_U64,
    PSNAM_T_F32,
    PSNAM_T_F64,
    PSNAM_T_MAX
};

enum psnam_op {
    PSNAM_OP_REPLACE = 0,
    PSNAM_OP_NO_OP,
    PSNAM_OP_SUM,
    PSNAM_OP_PROD,
    PSNAM_OP_MAX,
    PSNAM_OP_MIN,
    PSNAM_OP_LAND,
    PSNAM_OP_LOR,
    PSNAM_OP_LXOR,
    PSNAM_OP_BAND,
    PSNAM_OP_BOR,
    PSNAM_OP_BXOR,
    PSNAM_OP_COUNT
};

/* bytes per element; 0 for an unknown type */
size_t psnam_dtype_size(unsigned dtype);

/* target[i] = target[i] op origin[i] for n elements; 0, or -1 if op/dtype are not applicable
   (bitwise operations on floating point) */
int psnam_apply(unsigned op, unsigned dtype, void *target, const void *origin, size_t n);

/* compare-and-swap of one element: old value to out; swapped when target == compare */
int psnam_cas(unsigned dtype, void *target, const void *compare, const void *swap, void *out);

#endif /* PSNAM_OP_H_INCLUDED */
