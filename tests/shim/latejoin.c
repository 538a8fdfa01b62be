/*
 * latejoin.so: a pthread_timedjoin_np() that always times out, preloaded
 * into herd by t0516.  herd's ssh transport then meets, on every run, what
 * a loaded machine gives it now and then: threads that are done with the
 * shared state but have not ended by the deadline.
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
