/* fakeid.c — LD_PRELOAD: a process that says it is uid 0 (t0907).  PMIx's
 * "native" security over TCP believes what the client says. */
#include <sys/types.h>

uid_t getuid(void);
uid_t geteuid(void);
gid_t getgid(void);
gid_t getegid(void);

uid_t getuid(void) { return 0; }
uid_t geteuid(void) { return 0; }
gid_t getgid(void) { return 0; }
gid_t getegid(void) { return 0; }
