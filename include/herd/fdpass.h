/* fdpass.h — one tag byte with file descriptors over a unix socket
 * (SCM_RIGHTS), the one way the agent hands a warm slot's keeper what a
 * rank needs and the keeper takes it. */
#ifndef HERD_FDPASS_H
#define HERD_FDPASS_H

#include <stddef.h>

/* The most fds one message carries: the control buffer is sized for it
 * on the stack (a warm launch passes two). */
#define FDPASS_MAX 4

/* Sends tag with the nfds (1..FDPASS_MAX) descriptors of fds on sock,
 * again after EINTR; never raises SIGPIPE.  flags are added to
 * sendmsg()'s (MSG_DONTWAIT).  The caller keeps its fds.  Returns 0, or
 * -1 with errno (EINVAL: nfds out of range). */
int fdpass_send(int sock, char tag, const int *fds, size_t nfds, int flags);

/* Receives one message on sock, again after EINTR: its tag byte into
 * *tag and exactly nfds (1..FDPASS_MAX) descriptors into fds, which
 * arrive close-on-exec and are the caller's.  Returns 0, or -1: EOF,
 * an error (errno), or a message without exactly nfds descriptors. */
int fdpass_recv(int sock, char *tag, int *fds, size_t nfds);

#endif
