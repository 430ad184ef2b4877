/*
 * psnam_region.h - the file format of a persistent region: a shm segment (one file per segment
 * in /dev/shm, written by the netmod) and psnamd's --backing files (one file per region). A
 * header page, then the data. The header records what the region is (name, segments, sizes),
 * who made it and when, a format version and a SHA-256 checksum of itself, so that a later job
 * refuses a truncated, foreign or corrupted file with a message instead of reading garbage.
 * The data is the user's and is not checksummed (it changes with every store).
 */
#ifndef PSNAM_REGION_H_INCLUDED
#define PSNAM_REGION_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "psnam_proto.h"

#define PSNAM_FORMAT_VERSION 1
#define PSNAM_MAGIC          "PSNAMRG"
#define PSNAM_PAGE           4096u
#define PSNAM_SHM_PREFIX     "psnam." /* <dir>/psnam.<name>.<segment> */

typedef struct psnam_header {
    char magic[8];        /* PSNAM_MAGIC */
    uint32_t version;     /* PSNAM_FORMAT_VERSION */
    uint32_t header_size; /* bytes before the data: a multiple of PSNAM_PAGE */
    char name[PSNAM_NAME_MAX];
    char manifestation[8]; /* "shm" or "nam" */
    uint32_t nseg;         /* segments of the region */
    int32_t seg;           /* the segment this file holds; -1: all (psnamd), sizes follow */
    uint64_t size;         /* data bytes in this file */
    uint32_t disp_unit;
    uint32_t uid;     /* owner */
    int64_t created;  /* seconds since the epoch */
    int64_t attached; /* last attach (0: never) */
    uint32_t persistent;
    uint32_t unused;
    uint8_t verifier[PSNAM_MAC_LEN];    /* psnamd: the owner's V (psnam_proto.h) */
    uint8_t checksum[PSCOM_SHA256_LEN]; /* of the header up to here and the sizes after it */
    /* seg == -1: nseg uint64_t segment sizes follow */
} psnam_header_t;

/* A mapped region file */
typedef struct psnam_file {
    psnam_header_t *hdr; /* the mapping starts with it */
    uint64_t *sizes;     /* seg == -1: the segment sizes (in the mapping) */
    void *data;          /* hdr + header_size */
    size_t map_len;
} psnam_file_t;

/* "<dir>/psnam.<name>.<seg>" into buf (len bytes); 0, or -1 if it does not fit */
int psnam_shm_path(char *buf, size_t len, const char *dir, const char *name, int seg);

/* Create a region file (mode 0600, O_EXCL) from the header fields set in h (magic, version,
   header_size, checksum, created, uid are filled in) and, for seg == -1, nseg sizes; the data
   is reserved on the file system now (posix_fallocate), so a full /dev/shm fails here and not
   with SIGBUS on a later store. PSNAM_OK or PSNAM_E_EXIST / PSNAM_E_NOSPACE / PSNAM_E_IO /
   PSNAM_E_ACCESS with a reason in why. */
int psnam_file_create(const char *path, const psnam_header_t *h, const uint64_t *sizes,
                      psnam_file_t *f, char *why, size_t whylen);

/* Map an existing region file and check it: owned by the caller's effective uid (another
   user's file: PSNAM_E_ACCESS), mode without group/other access, the magic, the version, the
   checksum and a file size that holds all the data (else PSNAM_E_IO). Missing: PSNAM_E_NOENT. */
int psnam_file_open(const char *path, psnam_file_t *f, char *why, size_t whylen);

/* Record an attach (time) and seal the header again */
void psnam_file_touch(psnam_file_t *f);

/* msync and unmap */
void psnam_file_close(psnam_file_t *f);

/* Fill in the checksum of h (and its sizes when seg == -1) */
void psnam_header_seal(psnam_header_t *h);

#endif /* PSNAM_REGION_H_INCLUDED */
