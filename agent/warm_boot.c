/* warm_boot.c — the warm interpreter's bootstrap (warm_boot.py) inside
 * the agent's image, between herd_warm_boot and herd_warm_boot_end;
 * warm.c writes it into the agent's private directory.  The Makefile
 * passes its path as WARM_BOOT and rebuilds this file when it changes. */
#ifndef WARM_BOOT
#error "WARM_BOOT (warm_boot.py's path) is set by the Makefile"
#endif

__asm__(".section .rodata\n"
	".global herd_warm_boot\n"
	".global herd_warm_boot_end\n"
	".balign 16\n"
	"herd_warm_boot:\n"
	".incbin \"" WARM_BOOT "\"\n"
	"herd_warm_boot_end:\n"
	".previous\n");
