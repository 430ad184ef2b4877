/* psnam_op.c - accumulate operations on typed elements (psnamd applies them, one request at a
   time, so every element is updated atomically with respect to all clients) */
#include "psnam_op.h"

#include <stdint.h>
#include <string.h>

size_t psnam_dtype_size(unsigned dtype)
{
    static const size_t size[PSNAM_T_MAX] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return dtype < PSNAM_T_MAX ? size[dtype] : 0;
}

/* element-wise loops; memcpy keeps unaligned offsets legal. Sums and products are computed in
   U, an unsigned type at least as wide as the element's after promotion: integers wrap around
   (what MPI implementations do; overflowing a signed int would be undefined) */
#define ARITH(T, U)                                                                                \
    do {                                                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            T a, b;                                                                                \
            memcpy(&a, (char *)target + i * sizeof(T), sizeof(T));                                 \
            memcpy(&b, (const char *)origin + i * sizeof(T), sizeof(T));                           \
            switch (op) {                                                                          \
            case PSNAM_OP_SUM:                                                                     \
                a = (T)((U)a + (U)b);                                                              \
                break;                                                                             \
            case PSNAM_OP_PROD:                                                                    \
                a = (T)((U)a * (U)b);                                                              \
                break;                                                                             \
            case PSNAM_OP_MAX:                                                                     \
                a = a > b ? a : b;                                                                 \
                break;                                                                             \
            case PSNAM_OP_MIN:                                                                     \
                a = a < b ? a : b;                                                                 \
                break;                                                                             \
            case PSNAM_OP_LAND:                                                                    \
                a = (T)(a && b);                                                                   \
                break;                                                                             \
            case PSNAM_OP_LOR:                                                                     \
                a = (T)(a || b);                                                                   \
                break;                                                                             \
            case PSNAM_OP_LXOR:                                                                    \
                a = (T)(!a != !b);                                                                 \
                break;                                                                             \
            default:                                                                               \
                BITWISE(T);                                                                        \
            }                                                                                      \
            memcpy((char *)target + i * sizeof(T), &a, sizeof(T));                                 \
        }                                                                                          \
    } while (0)

#define BITWISE_INT(T)                                                                             \
    switch (op) {                                                                                  \
    case PSNAM_OP_BAND:                                                                            \
        a = (T)(a & b);                                                                            \
        break;                                                                                     \
    case PSNAM_OP_BOR:                                                                             \
        a = (T)(a | b);                                                                            \
        break;                                                                                     \
    case PSNAM_OP_BXOR:                                                                            \
        a = (T)(a ^ b);                                                                            \
        break;                                                                                     \
    default:                                                                                       \
        return -1;                                                                                 \
    }
#define BITWISE_FLOAT(T) return -1

int psnam_apply(unsigned op, unsigned dtype, void *target, const void *origin, size_t n)
{
    size_t sz = psnam_dtype_size(dtype);
    if (!sz || op >= PSNAM_OP_COUNT)
        return -1;
    if (op == PSNAM_OP_NO_OP)
        return 0;
    if (op == PSNAM_OP_REPLACE) {
        if (n) /* an empty request may come without data: origin NULL */
            memmove(target, origin, n * sz);
        return 0;
    }
#define BITWISE BITWISE_INT
    switch (dtype) {
    case PSNAM_T_I8:
        ARITH(int8_t, unsigned);
        return 0;
    case PSNAM_T_I16:
        ARITH(int16_t, unsigned);
        return 0;
    case PSNAM_T_I32:
        ARITH(int32_t, uint32_t);
        return 0;
    case PSNAM_T_I64:
        ARITH(int64_t, uint64_t);
        return 0;
    case PSNAM_T_U8:
        ARITH(uint8_t, unsigned);
        return 0;
    case PSNAM_T_U16:
        ARITH(uint16_t, unsigned);
        return 0;
    case PSNAM_T_U32:
        ARITH(uint32_t, uint32_t);
        return 0;
    case PSNAM_T_U64:
        ARITH(uint64_t, uint64_t);
        return 0;
    }
#undef BITWISE
#define BITWISE BITWISE_FLOAT
    switch (dtype) {
    case PSNAM_T_F32:
        ARITH(float, float);
        return 0;
    case PSNAM_T_F64:
        ARITH(double, double);
        return 0;
    }
#undef BITWISE
    return -1;
}

int psnam_cas(unsigned dtype, void *target, const void *compare, const void *swap, void *out)
{
    size_t sz = psnam_dtype_size(dtype);
    if (!sz)
        return -1;
    memcpy(out, target, sz);
    /* bitwise comparison, as MPI_Compare_and_swap on integer and byte types */
    if (memcmp(target, compare, sz) == 0)
        memcpy(target, swap, sz);
    return 0;
}
