/* The PSNAM protocol client and region format of src/psnam, built into libmpi for the PSNAM
   windows (psnamd and the psnam tool build the same sources). */
#define _GNU_SOURCE
#include "../../../../psnam/psnam_client.c"
#include "../../../../psnam/psnam_region.c"
