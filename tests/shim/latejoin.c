/*
 * latejoin.so: a pthread_timedjoin_np() that always times out.  Preloaded
 * into herd, it makes every join of herd's ssh threads miss its deadline,
 * as threads that are done with the shared state but not yet ended do on
 * a loaded machine.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

int pthread_timedjoin_np(pthread_t thread, void **ret,
			 const struct timespec *abstime)
{
	(void)thread;
	(void)ret;
	(void)abstime;
	return ETIMEDOUT;
}
