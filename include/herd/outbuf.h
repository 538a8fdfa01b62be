/* outbuf.h — output to a terminal, pipe or file that never blocks the
 * loop.
 *
 * herd's one loop also sends the heartbeats that keep the agents' ranks
 * alive, so a slow reader of herd's stdout (`herd run | less`, a stalled
 * tee, Ctrl-S on a terminal) must never stop it.  An outbuf writes what
 * the fd takes at once, keeps the rest (at most max bytes) and writes it
 * from the loop when the fd is writable.  A write that does not fit is
 * dropped whole and counted: the caller keeps a complete copy elsewhere
 * (the rank logs) and says how much the reader missed.
 *
 * How writes avoid blocking without touching file descriptions that
 * other processes share (O_NONBLOCK on fd 1 would also make the shell's
 * or the pager's writes to the same terminal fail with EAGAIN):
 *  - a regular file or a non-terminal device (/dev/null): plain write();
 *    the kernel does not make these wait for a reader;
 *  - a socket: send(MSG_DONTWAIT), non-blocking for this call only;
 *  - a pipe, FIFO or terminal: a private description of the same object,
 *    opened through /proc/self/fd/N with O_NONBLOCK (checked to be the
 *    same inode); if that open fails, poll(POLLOUT) and at most PIPE_BUF
 *    bytes per write, which a pipe that polls writable takes at once.
 *
 * The outbuf does not own fd.  Not thread-safe: loop callbacks only.
 */
#ifndef HERD_OUTBUF_H
#define HERD_OUTBUF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct loop;
struct outbuf;

/* Called from the loop when the buffer has emptied after some writes were
 * dropped; missed is the number of bytes dropped since the last call. */
typedef void (*outbuf_drained_fn)(struct outbuf *b, uint64_t missed,
				  void *arg);

/* Returns a buffer writing to fd, holding at most max bytes, or NULL
 * (errno set). */
struct outbuf *outbuf_new(struct loop *loop, int fd, size_t max);
/* Writes everything still held, waiting for the fd (poll, no time limit:
 * as any program whose reader is slow) and stops watching it.  Call before
 * freeing the loop.  NULL is accepted. */
void outbuf_free(struct outbuf *b);

void outbuf_on_drained(struct outbuf *b, outbuf_drained_fn cb, void *arg);

/* Writes the iovcnt pieces as one unit: all of them (now or later) or, when
 * they do not fit in what is left of max, none (counted as missed).
 * Returns 0 when taken, 1 when dropped. */
int outbuf_put(struct outbuf *b, const struct iovec *iov, int iovcnt);

/* Waits (poll, no time limit) until everything held is written or the fd
 * fails. */
void outbuf_flush(struct outbuf *b);

/* Bytes held now. */
size_t outbuf_pending(const struct outbuf *b);
/* Bytes dropped and not yet reported through the drained callback; the
 * count restarts at 0. */
uint64_t outbuf_take_missed(struct outbuf *b);

#endif
