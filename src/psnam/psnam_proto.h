/*
 * psnam_proto.h - the wire protocol between psnamd (the software NAM) and its clients (the
 * ch4:pscom netmod's nam windows, the psnam tool). Header only; both ends are built from it.
 *
 * Every message is one pscom message: a psnam_msg_t as its xheader, and data. Requests go
 * client -> psnamd and each one is answered by exactly one PSNAM_REPLY carrying the request's
 * id, in the order psnamd applied them (messages of one connection are applied in the order
 * they were sent). A reply's status is 0 or a PSNAM_E_* code; with an error, its data is a
 * one-line reason. The first message on a connection is psnamd's PSNAM_HELLO: the nonce the
 * client's proofs on this connection are bound to.
 *
 * Credentials: a user's key file (PSP_NAM_KEY, default ~/.psnam.key, 32 random bytes as hex,
 * mode 0600) gives the owner verifier V = HMAC(key, "psnam-owner-v1"). Creating a region sends V
 * (psnamd keeps it with the region; the key itself never leaves the user's nodes); everything
 * else on a region proves knowledge of V with HMAC(V, nonce || name), which a replay on another
 * connection cannot reuse.
 */
#ifndef PSNAM_PROTO_H_INCLUDED
#define PSNAM_PROTO_H_INCLUDED

#include <stdint.h>
#include <string.h>

#include "pscom_hmac.h"

#define PSNAM_PROTO_VERSION 1
#define PSNAM_SERVICE       "psnam" /* the pscom service psnamd serves (pscom_socket_serve) */
#define PSNAM_NAME_MAX      64      /* a region name, with its terminating NUL */
#define PSNAM_NONCE_LEN     16
#define PSNAM_MAC_LEN       PSCOM_SHA256_LEN
#define PSNAM_CHUNK_MAX     (4u << 20)  /* largest data of one request or reply */
#define PSNAM_SEG_ALL       0xffffffffu /* LOCK/UNLOCK: every segment (MPI_Win_lock_all) */
#define PSNAM_REASON_MAX    200

enum psnam_type {
    PSNAM_HELLO = 1, /* psnamd -> client: data = nonce */
    PSNAM_OPEN,      /* data = psnam_open_t [+ nseg x uint64 segment sizes when creating] */
    PSNAM_CLOSE,     /* region handle; frees a region opened with !PSNAM_F_PERSISTENT */
    PSNAM_PUT,       /* seg, offset; data = the bytes */
    PSNAM_GET,       /* seg, offset, len; reply data = the bytes */
    PSNAM_ACC,       /* seg, offset, op, dtype; data = elements */
    PSNAM_GACC,      /* as ACC; reply data = the elements before */
    PSNAM_CAS,       /* seg, offset, dtype; data = compare, swap; reply = the element before */
    PSNAM_LOCK,   /* seg (or PSNAM_SEG_ALL), arg = PSNAM_LOCK_SHARED|EXCLUSIVE; reply when held */
    PSNAM_UNLOCK, /* seg (or PSNAM_SEG_ALL) */
    PSNAM_LIST,   /* data = psnam_open_t (name empty, proof of V); reply = psnam_info_t[] */
    PSNAM_INFO,   /* data = psnam_open_t (name, proof); reply = psnam_info_t */
    PSNAM_FREE,   /* data = psnam_open_t (name, proof); refused while a client has it open */
    PSNAM_REPLY,  /* psnamd -> client */
    PSNAM_TYPE_MAX
};

enum psnam_err {
    PSNAM_OK = 0,
    PSNAM_E_PROTO,   /* malformed request */
    PSNAM_E_NOENT,   /* no such region */
    PSNAM_E_EXIST,   /* a region of that name exists */
    PSNAM_E_ACCESS,  /* the credential does not open this region */
    PSNAM_E_SIZE,    /* size or segment count differ from the region's */
    PSNAM_E_NOSPACE, /* psnamd's --memory (or its backing file system) is full */
    PSNAM_E_RANGE,   /* outside the segment */
    PSNAM_E_TYPE,    /* an element type or operation psnamd does not apply */
    PSNAM_E_BUSY,    /* FREE of a region that clients have open */
    PSNAM_E_IO,      /* the backing file failed */
    PSNAM_E_LOST,    /* client side: the connection to psnamd broke, or it stopped answering */
    PSNAM_E_MAX
};

enum { PSNAM_LOCK_SHARED = 1, PSNAM_LOCK_EXCLUSIVE = 2 };

/* OPEN flags */
#define PSNAM_F_CREATE     0x1 /* create it (fails if it exists) */
#define PSNAM_F_PERSISTENT 0x2 /* keep it after the last CLOSE */

typedef struct psnam_msg {
    uint8_t type; /* enum psnam_type */
    uint8_t version;
    uint8_t op;      /* ACC/GACC: enum psnam_op (psnam_op.h) */
    uint8_t dtype;   /* ACC/GACC/CAS: enum psnam_dtype */
    int32_t status;  /* REPLY: enum psnam_err */
    uint64_t id;     /* the client's, echoed in the reply */
    uint32_t region; /* OPEN's reply: the handle; later requests name it */
    uint32_t seg;
    uint64_t offset; /* bytes into the segment */
    uint64_t len;    /* GET: bytes wanted */
    uint64_t arg;    /* LOCK: its kind; OPEN reply: segment count */
} psnam_msg_t;

typedef struct psnam_open {
    char name[PSNAM_NAME_MAX];
    uint32_t flags; /* PSNAM_F_* */
    uint32_t nseg;  /* creating: segments; attaching: 0 or the expected count */
    uint32_t uid;   /* the creator's uid, for listings */
    uint32_t unused;
    uint8_t cred[PSNAM_MAC_LEN]; /* creating: V; else HMAC(V, nonce || name) */
} psnam_open_t;

/* What LIST and INFO report per region */
typedef struct psnam_info {
    char name[PSNAM_NAME_MAX];
    uint64_t size;     /* all segments */
    uint64_t seg_size; /* the largest segment */
    uint32_t nseg;
    uint32_t uid;
    int64_t created;
    int64_t attached;
    uint32_t clients; /* connections that have it open */
    uint32_t persistent;
} psnam_info_t;

/* A region name: 1-63 characters of letters, digits and -_. (not starting with a dot) */
static inline int psnam_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= PSNAM_NAME_MAX || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

static inline void psnam_owner_verifier(const uint8_t *key, size_t keylen, uint8_t v[PSNAM_MAC_LEN])
{
    pscom_hmac_sha256(key, keylen, "psnam-owner-v1", 14, v);
}

static inline void psnam_proof(const uint8_t v[PSNAM_MAC_LEN], const uint8_t nonce[PSNAM_NONCE_LEN],
                               const char *name, uint8_t mac[PSNAM_MAC_LEN])
{
    pscom_hmac_sha256_2(v, PSNAM_MAC_LEN, nonce, PSNAM_NONCE_LEN, name, strlen(name), mac);
}

static inline const char *psnam_err_str(int err)
{
    static const char *const s[] = {"ok",
                                    "malformed request",
                                    "no such region",
                                    "region exists",
                                    "credential refused",
                                    "size mismatch",
                                    "out of memory (--memory)",
                                    "outside the segment",
                                    "unsupported type or operation",
                                    "region in use",
                                    "backing file error",
                                    "connection to psnamd lost"};
    return err >= 0 && err < PSNAM_E_MAX ? s[err] : "unknown error";
}

#endif /* PSNAM_PROTO_H_INCLUDED */
