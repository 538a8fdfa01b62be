/* tune.c — DeepSpeed bucket sizes for a job's network: a platform file's
 * "network" section, else a `herd bench` run, fed to ds_tune_rule (see
 * tune.h and herd/dstune.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "herd/bind.h"
#include "herd/loop.h"
#include "herd/proc.h"
#include "herd/spec.h"
#include "launcher/hosts/resolve.h"
#include "launcher/gen/tune.h"

/* herd bench's stdout beyond this is not a probe table. */
#define BENCH_OUTPUT_MAX (1024 * 1024)

/* Reads a platform file herd trusts: a regular file (no link followed)
 * of root or this user that others may not write, at most
 * BIND_PLATFORM_FILE_MAX bytes.  Returns its malloc'd text (NUL-ended)
 * or NULL with err; *absent is set when it does not exist. */
static char *platform_read(const char *path, size_t *len, bool *absent,
			   struct herd_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t off = 0;
	int fd;

	*absent = false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		*absent = errno == ENOENT;
		herd_errprintf(err, "cannot open platform file %s: %s", path,
			       strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > BIND_PLATFORM_FILE_MAX) {
		herd_errprintf(err,
			       "platform file %s: not a regular file of at "
			       "most %d bytes",
			       path, BIND_PLATFORM_FILE_MAX);
		goto fail;
	}
	if ((st.st_uid != 0 && st.st_uid != getuid()) ||
	    (st.st_mode & S_IWOTH)) {
		herd_errprintf(err,
			       "platform file %s: not trusted: it must belong "
			       "to root or to you and others must not write "
			       "it",
			       path);
		goto fail;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		herd_errprintf(err, "out of memory");
		goto fail;
	}
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	buf[off] = '\0';
	*len = off;
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* Tries path: 1 with out filled when it has a network section, 0 when it
 * has none (or, when optional, does not exist), -1 with err. */
static int try_platform(const char *path, bool optional,
			struct ds_platform_net *out, struct herd_err *err)
{
	bool absent;
	size_t len = 0;
	char *text = platform_read(path, &len, &absent, err);
	int rc;

	if (!text)
		return optional && absent ? 0 : -1;
	rc = ds_platform_net_parse(text, len, path, out, err);
	free(text);
	return rc;
}

/* The child running herd bench, read from the loop until its stdout
 * ends and it has been reaped. */
struct bench_run {
	char *buf;
	size_t len;
	int fd;
	bool exited;
	int status;
};

static void bench_done(struct loop *loop, struct bench_run *b)
{
	if (b->fd < 0 && b->exited)
		loop_stop(loop);
}

static void on_bench_output(struct loop *loop, int fd, short revents,
			    void *arg)
{
	struct bench_run *b = arg;
	ssize_t n = read(fd, b->buf + b->len, BENCH_OUTPUT_MAX - b->len);

	(void)revents;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0)
		b->len += (size_t)n;
	if (n <= 0 || b->len == BENCH_OUTPUT_MAX) {
		loop_fd_del(loop, fd);
		close(fd);
		b->fd = -1;
		bench_done(loop, b);
	}
}

static void on_bench_exit(struct loop *loop, const struct proc_exit *e,
			  void *arg)
{
	struct bench_run *b = arg;

	b->exited = true;
	b->status = e->status;
	bench_done(loop, b);
}

/* Runs `herd bench --sizes S --iters N job_path` as a child (this very
 * program, /proc/self/exe, started through proc.h: nothing but exec
 * after fork) and reads its stdout into a malloc'd string.  The child
 * dies with us (pdeathsig); its stderr is ours. */
static char *run_bench(const char *job_path, struct herd_err *err)
{
	char *argv[] = {"herd",	 "bench",	   "--sizes",
			TUNE_BENCH_SIZES, "--iters", TUNE_BENCH_ITERS,
			(char *)job_path, NULL};
	struct proc_opts opts = {
	    .path = "/proc/self/exe",
	    .io = {[1] = {.kind = PROC_FD_PIPE},
		   [2] = {.kind = PROC_FD_DUP, .fd = STDERR_FILENO}},
	    .group = PROC_GROUP_KEEP,
	    .pdeathsig = SIGTERM,
	    .wait_exec = true,
	};
	struct bench_run b = {.fd = -1};
	struct loop *loop = loop_new();
	int status;

	if (!loop || !(b.buf = malloc(BENCH_OUTPUT_MAX + 1))) {
		herd_errprintf(err, "out of memory");
		goto fail;
	}
	fflush(NULL);
	if (proc_spawn(loop, argv, &opts, on_bench_exit, &b, err) < 0)
		goto fail;
	b.fd = opts.io[1].fd;
	if (loop_fd_add(loop, b.fd, POLLIN, on_bench_output, &b) < 0) {
		herd_errprintf(err, "loop: %s", strerror(errno));
		close(b.fd);
		b.fd = -1;
	}
	/* Until its stdout ends and it is reaped. */
	if (loop_run(loop) < 0 && !b.exited) {
		herd_errprintf(err, "loop: %s", strerror(errno));
		goto fail;
	}
	if (b.fd >= 0)
		close(b.fd);
	loop_free(loop);
	loop = NULL;
	b.buf[b.len] = '\0';
	status = b.status;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFEXITED(status))
			herd_errprintf(err,
				       "herd bench %s failed (exit status %d): "
				       "give a platform file with --platform "
				       "to tune without measuring",
				       job_path, WEXITSTATUS(status));
		else
			herd_errprintf(err,
				       "herd bench %s was killed by signal %d",
				       job_path, WTERMSIG(status));
		goto fail;
	}
	return b.buf;
fail:
	if (loop)
		loop_free(loop);
	free(b.buf);
	return NULL;
}

int tune_job(const char *job_path, const char *platform, int elem_bytes,
	     struct tune_result *out, struct herd_err *err)
{
	struct resolved res = {0};
	struct spec *spec = NULL;
	const char *from;
	char *text = NULL;
	int status = EXIT_SPEC, rc = 0;

	memset(out, 0, sizeof(*out));
	if (!(spec = spec_load(job_path, err)))
		goto out;
	if (cli_job_paths(spec, job_path) < 0) {
		herd_errprintf(err, "cannot resolve paths next to %s",
			       job_path);
		status = 1;
		goto out;
	}
	if (resolve_nodes(spec, &res, err) < 0) {
		status = res.fail == RESOLVE_FAIL_INPUT ? EXIT_SPEC : 1;
		goto out;
	}
	out->nodes = (long)res.nodes->count;
	out->slots = spec->nodes.slots;
	for (size_t i = 0; out->slots <= 0 && i < res.nodes->count; i++)
		if (res.nodes->entries[i].slots > out->slots)
			out->slots = res.nodes->entries[i].slots;
	if (out->slots <= 0) {
		out->slots = TUNE_SLOTS_ASSUMED;
		out->slots_assumed = true;
	}
	/* 1. A platform file. */
	if (platform) {
		from = platform;
		rc = try_platform(platform, false, &out->platform, err);
	} else {
		if (spec->bind.topology_file) {
			from = spec->bind.topology_file;
			rc = try_platform(from, false, &out->platform, err);
		}
		if (rc == 0) {
			from = TUNE_PLATFORM_DEFAULT;
			rc = try_platform(from, true, &out->platform, err);
		}
	}
	if (rc < 0)
		goto out;
	if (rc == 0 && platform) {
		herd_errprintf(err,
			       "%s has no \"network\" section (see herd render "
			       "--help)",
			       platform);
		goto out;
	}
	if (rc == 1) {
		snprintf(out->source, sizeof(out->source), "platform file %s",
			 from);
		out->net.hop_latency_us = out->platform.latency_us;
		out->net.bandwidth_Bps = out->platform.rate_gbps_sum * 1e9 / 8;
	} else {
		/* 2. Measure. */
		if (out->nodes < 2) {
			herd_errprintf(err,
				       "%s has one node: nothing crosses the "
				       "network to measure; give a platform "
				       "file with --platform",
				       job_path);
			goto out;
		}
		if (!(text = run_bench(job_path, err))) {
			status = 1;
			goto out;
		}
		if (ds_bench_parse(text, &out->bench, err) < 0) {
			status = 1;
			goto out;
		}
		out->measured = true;
		snprintf(out->source, sizeof(out->source), "herd bench %s",
			 job_path);
		out->net.hop_latency_us = out->bench.hop_latency_us;
		out->net.bandwidth_Bps = out->bench.bandwidth_Bps;
		out->nodes = out->bench.nodes;
	}
	out->net.ranks = out->nodes * out->slots;
	out->net.elem_bytes = elem_bytes == 4 ? 4 : 2;
	ds_tune_rule(&out->net, &out->tuned);
	status = 0;
out:
	free(text);
	resolve_free(&res);
	spec_free(spec);
	return status;
}

void tune_print(FILE *f, const struct tune_result *r)
{
	const struct ds_tuned *t = &r->tuned;

	if (r->measured)
		fprintf(f,
			"herd: tune: measured (%s) over %d nodes: %zu-byte "
			"all-reduce %.1f us over 2(n-1) = %d ring steps = "
			"%.2f us per step; %zu bytes at busbw %.3f GB/s, "
			"%.3f GB/s with the latency taken out\n",
			r->source, r->bench.nodes, r->bench.small_bytes,
			r->bench.small_time_us, 2 * (r->bench.nodes - 1),
			r->bench.hop_latency_us, r->bench.large_bytes,
			r->bench.large_busbw_GBps,
			r->bench.bandwidth_Bps / 1e9);
	else
		fprintf(f,
			"herd: tune: from %s: %zu NIC%s (%s), %.0f Gb/s in "
			"all = %.3f GB/s; hop latency %.1f us (%s)\n",
			r->source, r->platform.n_nics,
			r->platform.n_nics == 1 ? "" : "s", r->platform.fabric,
			r->platform.rate_gbps_sum,
			r->platform.rate_gbps_sum / 8, r->platform.latency_us,
			r->platform.latency_given ? "latency_us"
						  : "the fabric's default");
	fprintf(f,
		"herd: tune: %ld ranks = %ld nodes x %ld slots%s; bucket = "
		"%.0f x %ld x %.2f us x %.3f GB/s = %.0f bytes = %.0f "
		"elements of %d bytes%s\n",
		r->net.ranks, r->nodes, r->slots,
		r->slots_assumed ? " (slots: auto, assumed; set nodes.slots)"
				 : "",
		DS_TUNE_K, r->net.ranks, r->net.hop_latency_us,
		r->net.bandwidth_Bps / 1e9, t->bucket_bytes,
		t->bucket_bytes / r->net.elem_bytes, r->net.elem_bytes,
		t->clamped_low	  ? ", raised to the floor"
		: t->clamped_high ? ", cut to the ceiling"
				  : "");
	fprintf(f,
		"herd: tune: inputs latency_us=%.3f bandwidth_Bps=%.0f "
		"ranks=%ld elem_bytes=%d\n",
		r->net.hop_latency_us, r->net.bandwidth_Bps, r->net.ranks,
		r->net.elem_bytes);
	fprintf(f,
		"herd: tune: chose reduce_bucket_size=%ld "
		"allgather_bucket_size=%ld stage3_prefetch_bucket_size=%ld "
		"stage3_param_persistence_threshold=%ld\n",
		t->reduce_bucket_size, t->allgather_bucket_size,
		t->prefetch_bucket_size, t->param_persistence_threshold);
}
