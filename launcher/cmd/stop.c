/* cmd/stop.c — `herd stop JOB [--wait]`: as Ctrl-C in a foreground run,
 * through the job's control socket (ctl/sock.c). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/view/ctlclient.h"
#include "herd/proto.h"

/* 4 KiB: herd's answers to stop are an info and an end frame; output
 * frames never come to a client that did not attach. */
#define STOP_FRAME_MAX (PROTO_CTL_DATA_MAX + 4096)

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd stop JOB [--wait]\n\n"
		"Stops a running job as Ctrl-C does in a foreground run: its\n"
		"ranks get SIGTERM, then SIGKILL after health.grace (a second\n"
		"herd stop kills them at once).  The exit status is recorded\n"
		"in the run's events.jsonl.  JOB is the job's id, name or run\n"
		"directory.\n\n"
		"  --wait      wait for the job to end; exit with its status\n"
		"  -h, --help  show this text\n\n"
		"Exit status: 0 the job was told to stop (with --wait: the\n"
		"job's status); 1 no such running job or its controller is\n"
		"gone; 2 bad usage.\n");
}

int cmd_stop(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"wait", no_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct ctlclient_job j;
	struct proto_reader *r = NULL;
	struct proto_frame *f = NULL;
	struct herd_err err;
	bool wait = false;
	int ch, fd = -1, status = 1, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "wh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'w':
			wait = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_bad_option("stop", cli_bad_word(argc, argv), usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("stop",
				 "expected one JOB (id, name or run "
				 "directory), got %d arguments",
				 argc - optind);
	herd_err_clear(&err);
	if (ctlclient_find(argv[optind], &j, &err) < 0 ||
	    (fd = ctlclient_request(&j, "stop", &err)) < 0 ||
	    !(r = proto_reader_new(STOP_FRAME_MAX))) {
		cli_error("stop: %s", err.text[0] ? err.text : "out of memory");
		goto out;
	}
	while ((rc = ctlclient_next(fd, r, &f, &err)) == 1) {
		const char *kind =
		    json_string_value(json_object_get(f->body, "kind"));

		if (!strcmp(kind, "info")) {
			printf("herd: %s: %s\n", j.id,
			       json_string_value(
				   json_object_get(f->body, "message"))
				   ?: "stopping");
			fflush(stdout);
			if (!wait) {
				status = 0;
				break;
			}
		} else if (!strcmp(kind, "end")) {
			status = (int)json_integer_value(
			    json_object_get(f->body, "status"));
			printf("herd: %s: ended, exit status %d\n", j.id,
			       status);
			break;
		}
		proto_frame_free(f);
		f = NULL;
	}
	if (rc == 0)
		cli_error("stop: %s: the controller went away before it "
			  "answered",
			  j.id);
	else if (rc < 0)
		cli_error("stop: %s: %s", j.id, err.text);
out:
	proto_frame_free(f);
	proto_reader_free(r);
	if (fd >= 0)
		close(fd);
	return status;
}
