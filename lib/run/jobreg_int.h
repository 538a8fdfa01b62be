/* jobreg_int.h — what jobreg.c (the state directories, the socket
 * directory) and jobreg_entry.c (the registry's entries) share.
 */
#ifndef HERD_JOBREG_INT_H
#define HERD_JOBREG_INT_H

/* A run id is 24 characters; a file name is at most NAME_MAX. */
#define JOBREG_ID_MAX 200

/* 1 when id can name a job: not empty, no '/', no leading '.', at most
 * JOBREG_ID_MAX bytes. */
int jobreg_id_ok(const char *id);

#endif
