/* stuck.c — a native rank that hangs in a function of its own
 * (t0620-hang.t): prints its pid, then waits for ever in
 * stuck_in_native_loop. */
#include <stdio.h>
#include <unistd.h>

static void __attribute__((noinline)) stuck_in_native_loop(void)
{
	for (;;)
		pause();
}

int main(void)
{
	printf("native rank pid %d\n", (int)getpid());
	fflush(stdout);
	stuck_in_native_loop();
	return 0;
}
