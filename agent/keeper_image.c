/* keeper_image.c — the keeper program (keeper/main.c, built before the
 * agent) inside the agent's image, between herd_keeper_image and
 * herd_keeper_image_end; keeper.c copies it into a memfd.  The Makefile
 * passes its path as KEEPER_IMAGE and rebuilds this file when it
 * changes. */
#ifndef KEEPER_IMAGE
#error "KEEPER_IMAGE (the keeper program's path) is set by the Makefile"
#endif

__asm__(".section .rodata\n"
	".global herd_keeper_image\n"
	".global herd_keeper_image_end\n"
	".balign 16\n"
	"herd_keeper_image:\n"
	".incbin \"" KEEPER_IMAGE "\"\n"
	"herd_keeper_image_end:\n"
	".previous\n");
