/* stack_parse.c — reading a rank's stack as Python's faulthandler or
 * gdb prints it, line by line (agent.h's stack_parse), down to the one
 * frame that says where the rank waits, and whether that frame is in a
 * collective (the table below).  stacks.c feeds it. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"

/* ---- the table of collectives ----------------------------------------------
 *
 * A frame is "in a collective" when its file or its function says it is
 * communication that waits for the other ranks.  For Python the innermost
 * frame of the main thread is looked at; for gdb every frame of thread 1
 * (the innermost are libc's poll or futex under the MPI call).
 */
enum coll_kind {
	COLL_FILE,	  /* the file's path contains it */
	COLL_FUNC_PREFIX, /* the function's name starts with it */
	COLL_FUNC,	  /* the function's name is it */
};

static const struct {
	enum coll_kind kind;
	const char *text;
} collectives[] = {
    {COLL_FILE, "torch/distributed/"},
    /* DistributedDataParallel: forward broadcasts buffers, and backward
     * ends waiting for the gradients' all-reduce (the main thread sits
     * in torch/autograd's backward meanwhile). */
    {COLL_FILE, "torch/nn/parallel/distributed.py"},
    {COLL_FILE, "torch/autograd/"},
    {COLL_FILE, "deepspeed/comm/"},
    {COLL_FILE, "mpi4py"},
    {COLL_FILE, "libmpi"},
    {COLL_FILE, "libnccl"},
    {COLL_FILE, "libgloo"},
    {COLL_FUNC_PREFIX, "MPI_"},
    {COLL_FUNC_PREFIX, "PMPI_"},
    {COLL_FUNC_PREFIX, "ompi_coll"},
    {COLL_FUNC_PREFIX, "mca_coll"},
    {COLL_FUNC_PREFIX, "nccl"},
    {COLL_FUNC_PREFIX, "gloo::"},
    {COLL_FUNC_PREFIX, "c10d::"},
    {COLL_FUNC, "all_reduce"},
    {COLL_FUNC, "allreduce"},
    {COLL_FUNC, "barrier"},
    {COLL_FUNC, "monitored_barrier"},
    {COLL_FUNC, "broadcast"},
    {COLL_FUNC, "all_gather"},
    {COLL_FUNC, "all_gather_into_tensor"},
    {COLL_FUNC, "all_gather_object"},
    {COLL_FUNC, "reduce_scatter"},
    {COLL_FUNC, "reduce_scatter_tensor"},
    {COLL_FUNC, "all_to_all"},
    {COLL_FUNC, "all_to_all_single"},
    {COLL_FUNC, "wait"},
    {COLL_FUNC, "recv"},
};

bool stacks_in_collective(const char *func, const char *file)
{
	for (size_t i = 0; i < sizeof(collectives) / sizeof(collectives[0]);
	     i++) {
		const char *t = collectives[i].text;

		switch (collectives[i].kind) {
		case COLL_FILE:
			if (file && strstr(file, t))
				return true;
			break;
		case COLL_FUNC_PREFIX:
			if (func && !strncmp(func, t, strlen(t)))
				return true;
			break;
		case COLL_FUNC:
			if (func && !strcmp(func, t))
				return true;
			break;
		}
	}
	return false;
}

/* ---- the parsers ------------------------------------------------------------
 */

void stack_copy_cut(char *dst, size_t size, const char *src, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

const char *stack_base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

void stack_parse_init(struct stack_parse *p, enum stack_method method)
{
	memset(p, 0, sizeof(*p));
	p->method = method;
}

/* Sets p's answer from one frame. */
static void take_frame(struct stack_parse *p, const struct stack_frame *f)
{
	if (f->line > 0)
		snprintf(p->frame, sizeof(p->frame), "%s (%s:%d)", f->func,
			 stack_base_name(f->file), f->line);
	else if (f->file[0])
		snprintf(p->frame, sizeof(p->frame), "%s (%s)", f->func,
			 stack_base_name(f->file));
	else
		snprintf(p->frame, sizeof(p->frame), "%s", f->func);
}

/* Python: a thread's block has ended. */
static void py_block_end(struct stack_parse *p)
{
	if (!p->in_block)
		return;
	p->in_block = false;
	if (!p->n_frames)
		return;
	if (!strcmp(p->outer.func, "<module>")) {
		/* The main thread: its block ends in the script's body. */
		p->found = true;
		p->done = true;
		if (p->boot && !strcmp(p->inner.file, p->boot)) {
			/* In herd's bootstrap: the script is not running (it
			 * raised, as a rank whose peer died first does, or
			 * returned).  No frame to blame. */
			p->outside_line = p->inner.line > 0 ? p->inner.line : 1;
			return;
		}
		take_frame(p, &p->inner);
		p->in_collective =
		    stacks_in_collective(p->inner.func, p->inner.file);
	} else if (!p->have_fallback) {
		/* No main thread seen (yet): the first block will do. */
		p->fallback = p->inner;
		p->have_fallback = true;
	}
}

/* `  File "X", line N in F` */
static bool py_frame(const char *line, struct stack_frame *f)
{
	const char *q, *end;
	char *stop;
	long n;

	if (strncmp(line, "  File \"", 8))
		return false;
	q = line + 8;
	end = strstr(q, "\", line ");
	if (!end)
		return false;
	stack_copy_cut(f->file, sizeof(f->file), q, (size_t)(end - q));
	q = end + 8;
	n = strtol(q, &stop, 10);
	if (stop == q || strncmp(stop, " in ", 4))
		return false;
	f->line = n > 0 && n < 1000000000 ? (int)n : 0;
	stack_copy_cut(f->func, sizeof(f->func), stop + 4, strlen(stop + 4));
	return true;
}

static void py_line(struct stack_parse *p, const char *line)
{
	struct stack_frame f;

	if (!p->started) {
		if (!strncmp(line, "Fatal Python error:", 19))
			p->started = true;
		return;
	}
	if (strstr(line, "(most recent call first):")) {
		py_block_end(p);
		p->in_block = true;
		p->n_frames = 0;
		return;
	}
	if (p->in_block && py_frame(line, &f)) {
		if (p->n_frames++ == 0)
			p->inner = f;
		p->outer = f;
		return;
	}
	if (p->in_block && !strcmp(line, "  ..."))
		return; /* a stack deeper than faulthandler prints */
	py_block_end(p);
	if (!strncmp(line, "Extension modules:", 18))
		p->done = true;
}

/* gdb: `#N  0xADDR in FUNC (ARGS) at FILE:LINE`, `#N  FUNC (ARGS) at
 * FILE:LINE` or `... from LIB`. */
static bool gdb_frame(const char *line, struct stack_frame *f)
{
	const char *q = line + 1, *end, *at;

	if (line[0] != '#' || !isdigit((unsigned char)line[1]))
		return false;
	while (isdigit((unsigned char)*q))
		q++;
	while (*q == ' ')
		q++;
	if (!strncmp(q, "0x", 2)) {
		const char *in = strstr(q, " in ");

		if (!in)
			return false;
		q = in + 4;
	}
	end = strstr(q, " (");
	if (!end)
		end = q + strlen(q);
	memset(f, 0, sizeof(*f));
	stack_copy_cut(f->func, sizeof(f->func), q, (size_t)(end - q));
	at = strstr(end, ") at ");
	if (at) {
		const char *colon = strrchr(at + 5, ':');

		if (colon) {
			stack_copy_cut(f->file, sizeof(f->file), at + 5,
				       (size_t)(colon - at - 5));
			long n = strtol(colon + 1, NULL, 10);

			f->line = n > 0 && n < 1000000000 ? (int)n : 0;
		}
	} else if ((at = strstr(end, " from "))) {
		stack_copy_cut(f->file, sizeof(f->file), at + 6,
			       strlen(at + 6));
	}
	return true;
}

/* A frame of the C library (or another distribution-built library with
 * its debug information installed): its file is relative to the
 * library's build tree ("../sysdeps/unix/sysv/linux/pause.c"), or its
 * function is internal ("__libc_pause", "__GI___poll"). */
static bool libc_frame(const struct stack_frame *f)
{
	return !strncmp(f->file, "../", 3) || !strncmp(f->file, "./", 2) ||
	       !strncmp(f->func, "__", 2);
}

static void gdb_line(struct stack_parse *p, const char *line)
{
	struct stack_frame f;

	if (!strncmp(line, "Thread ", 7)) {
		/* "Thread 1 (Thread 0x... (LWP n) "name"):" or
		 * "Thread 1 (process n):" */
		if (p->in_block)
			p->done = p->found;
		p->in_block = !strncmp(line, "Thread 1 ", 9);
		p->n_frames = 0;
		return;
	}
	if (!p->in_block || !gdb_frame(line, &f))
		return;
	if (p->n_frames++ == 0) {
		p->inner = f;
		take_frame(p, &f);
		p->found = true;
	}
	/* The innermost frame with a source line that is not the C
	 * library's is the program's own. */
	if (f.line > 0 && !p->have_fallback && !libc_frame(&f)) {
		p->fallback = f;
		p->have_fallback = true;
		take_frame(p, &f);
	}
	if (stacks_in_collective(f.func, f.file))
		p->in_collective = true;
}

void stack_parse_line(struct stack_parse *p, const char *line)
{
	if (p->done)
		return;
	if (p->method == STACK_PYTHON)
		py_line(p, line);
	else
		gdb_line(p, line);
}

void stack_parse_end(struct stack_parse *p)
{
	if (p->method == STACK_PYTHON) {
		py_block_end(p);
		if (!p->found && p->have_fallback) {
			/* No thread ended in <module> (embedded Python, a
			 * thread-only program): the first thread seen. */
			take_frame(p, &p->fallback);
			p->in_collective = stacks_in_collective(
			    p->fallback.func, p->fallback.file);
			p->found = true;
		}
	}
	p->done = true;
}
