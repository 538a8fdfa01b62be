/* test_proto_dispatch.c — the wire contract (proto_rules[],
 * lib/wire/proto_rules.c) against the frame tables of the two programs:
 * every frame type an agent may send (a row with a to_herd body) has a
 * handler in herd's frame table, and herd's table handles no other type;
 * every type herd may send an agent (a to_agent body) has a handler in the
 * agent's frame table, and that table handles no other.  A frame the
 * contract allows but no handler takes fails a node at run time; a handler
 * the contract never lets through is dead code.
 *
 * The two tables are static in their programs, so the test reads them from
 * the source: in each tree (launcher/, agent/) the one array declared
 * `[PROTO_TYPE_MAX_ + 1] = {`, whose `[PROTO_X] = handler` entries name the
 * types it handles.  The tree is found from this file's path (the tests
 * are built and run from the top of the source tree).
 */
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/proto.h"
#include "lib/wire/proto_int.h"

/* The opening of a frame table, without blanks. */
#define TABLE_OPEN "[PROTO_TYPE_MAX_+1]={"
/* 4 MiB: the largest source file read (the largest is about 100 KiB). */
#define SOURCE_MAX (4u * 1024 * 1024)
/* Room for every type's name, one blank before each. */
#define LIST_MAX 2048

struct table {
	/* where the table was found: "launcher/ctl/ctl.c" */
	char file[512];
	/* how many tables the tree holds (exactly one is expected) */
	int found;
	/* handled[t]: the table has an entry for type t */
	int handled[PROTO_TYPE_MAX_ + 1];
	/* what went wrong while reading, "" when nothing */
	char error[2048];
};

static char source_root[256];

/* The top of the source tree: this file's path without
 * "tests/unit/test_proto_dispatch.c" ("." when that leaves nothing). */
static void find_root(void)
{
	const char *here = __FILE__;
	const char *tail = strstr(here, "tests/unit/");
	size_t n = tail ? (size_t)(tail - here) : 0;

	if (n == 0) {
		snprintf(source_root, sizeof(source_root), ".");
		return;
	}
	snprintf(source_root, sizeof(source_root), "%.*s", (int)n, here);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(SOURCE_MAX + 1);
	if (!buf)
		goto out;
	n = fread(buf, 1, SOURCE_MAX, f);
	if (ferror(f) || n == SOURCE_MAX) {
		free(buf);
		buf = NULL;
		goto out;
	}
	buf[n] = '\0';
	*len = n;
out:
	fclose(f);
	return buf;
}

/* The text with comments and blanks removed; string and character
 * literals are kept as they are (a comment opener inside one opens
 * nothing). */
static char *squeeze(const char *s, size_t len)
{
	char *out = malloc(len + 1), *o = out;
	size_t i = 0;

	if (!out)
		return NULL;
	while (i < len) {
		if (s[i] == '"' || s[i] == '\'') {
			char quote = s[i];

			*o++ = s[i++];
			while (i < len && s[i] != quote && s[i] != '\n') {
				if (s[i] == '\\' && i + 1 < len)
					*o++ = s[i++];
				*o++ = s[i++];
			}
			if (i < len)
				*o++ = s[i++];
		} else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
			const char *end = strstr(s + i + 2, "*/");

			i = end ? (size_t)(end - s) + 2 : len;
		} else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
			while (i < len && s[i] != '\n')
				i++;
		} else if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
			   s[i] == '\r') {
			i++;
		} else {
			*o++ = s[i++];
		}
	}
	*o = '\0';
	return out;
}

/* The type a frame's enum name ("PROTO_HELLO", len bytes) stands for, by
 * the rows' names; 0 when no row has it. */
static int type_of(const char *name, size_t len)
{
	if (len <= 6 || strncmp(name, "PROTO_", 6))
		return 0;
	for (int t = PROTO_HELLO; t <= PROTO_TYPE_MAX_; t++) {
		const char *row = proto_rules[t].name;

		if (row && strlen(row) == len - 6 &&
		    !strncmp(row, name + 6, len - 6))
			return t;
	}
	return 0;
}

/* Collects the entries of the table that starts at body (after its "{"),
 * up to its "};". */
static void parse_table(struct table *tab, const char *body)
{
	const char *end = strstr(body, "};");
	const char *p = body;

	if (!end) {
		snprintf(tab->error, sizeof(tab->error),
			 "%s: the frame table has no end", tab->file);
		return;
	}
	while ((p = strchr(p, '[')) && p < end) {
		const char *close = strchr(p, ']');
		int t;

		if (!close || close > end || close[1] != '=' ||
		    !(t = type_of(p + 1, (size_t)(close - p - 1)))) {
			snprintf(tab->error, sizeof(tab->error),
				 "%s: an entry of the frame table is not "
				 "[PROTO_X] = handler with X a row of "
				 "proto_rules: \"%.40s\"",
				 tab->file, p);
			return;
		}
		if (tab->handled[t]) {
			snprintf(tab->error, sizeof(tab->error),
				 "%s: PROTO_%s twice in the frame table",
				 tab->file, proto_rules[t].name);
			return;
		}
		tab->handled[t] = 1;
		p = close + 1;
	}
}

/* nftw() takes no argument: the table being filled. */
static struct table *walk_table;

static int visit(const char *path, const struct stat *st, int kind,
		 struct FTW *ftw)
{
	size_t len = strlen(path), n = 0;
	char *text, *flat, *at;

	(void)st;
	(void)ftw;
	if (kind != FTW_F || len < 2 || strcmp(path + len - 2, ".c"))
		return 0;
	text = read_file(path, &n);
	if (!text) {
		snprintf(walk_table->error, sizeof(walk_table->error),
			 "%s: cannot read: %s", path, strerror(errno));
		return 1;
	}
	flat = squeeze(text, n);
	free(text);
	if (!flat)
		return 1;
	for (at = flat; (at = strstr(at, TABLE_OPEN));
	     at += strlen(TABLE_OPEN)) {
		if (walk_table->found++ == 0) {
			snprintf(walk_table->file, sizeof(walk_table->file),
				 "%s", path);
			parse_table(walk_table, at + strlen(TABLE_OPEN));
		}
	}
	free(flat);
	return 0;
}

/* The frame table of one program's tree (relative to the source root). */
static void load_table(struct table *tab, const char *tree)
{
	char dir[sizeof(source_root) + 64];

	memset(tab, 0, sizeof(*tab));
	snprintf(dir, sizeof(dir), "%s/%s", source_root, tree);
	walk_table = tab;
	if (nftw(dir, visit, 16, FTW_PHYS) < 0 && !tab->error[0])
		snprintf(tab->error, sizeof(tab->error), "%s: %s", dir,
			 strerror(errno));
	walk_table = NULL;
	if (tab->error[0])
		fail_msg("%s", tab->error);
	if (tab->found != 1)
		fail_msg(
		    "%s: %d arrays declared [PROTO_TYPE_MAX_ + 1] = {...}, "
		    "expected exactly one (the program's frame table, "
		    "[PROTO_X] = handler)",
		    dir, tab->found);
}

/* body(t) is the body the contract lets travel the program's way. */
static void expect_table(const char *tree, const char *program,
			 const char *sender,
			 const struct proto_body *(*body)(int t))
{
	struct table tab;
	char missing[LIST_MAX] = "", extra[LIST_MAX] = "";

	load_table(&tab, tree);
	for (int t = PROTO_HELLO; t <= PROTO_TYPE_MAX_; t++) {
		int allowed = body(t)->format != NULL;
		char *list = allowed ? missing : extra;

		if (allowed == tab.handled[t])
			continue;
		snprintf(list + strlen(list), LIST_MAX - strlen(list), " %s",
			 proto_rules[t].name);
	}
	if (missing[0])
		fail_msg("%s: %s's frame table has no handler for what %s may "
			 "send it:%s",
			 tab.file, program, sender, missing);
	if (extra[0])
		fail_msg("%s: %s's frame table handles what the wire contract "
			 "never lets %s send it:%s",
			 tab.file, program, sender, extra);
}

static const struct proto_body *to_herd(int t)
{
	return &proto_rules[t].to_herd;
}

static const struct proto_body *to_agent(int t)
{
	return &proto_rules[t].to_agent;
}

/* Every type has one row with a name of its own, and some way to travel. */
static void test_rules_complete(void **state)
{
	(void)state;
	assert_null(proto_rules[0].name);
	for (int t = PROTO_HELLO; t <= PROTO_TYPE_MAX_; t++) {
		const struct proto_rule *r = &proto_rules[t];

		if (!r->name)
			fail_msg("frame type %d has no row", t);
		assert_string_equal(proto_type_name(t), r->name);
		if (!r->to_herd.format && !r->to_agent.format &&
		    !r->to_control.format && !r->to_client.format)
			fail_msg("%s: no direction carries it", r->name);
		if (r->data_min > r->data_max)
			fail_msg("%s: data_min over data_max", r->name);
		for (int u = PROTO_HELLO; u < t; u++)
			if (!strcmp(proto_rules[u].name, r->name))
				fail_msg("two rows named %s", r->name);
	}
}

/* A name that is no row's is not taken for one. */
static void test_type_of(void **state)
{
	(void)state;
	assert_int_equal(type_of("PROTO_HELLO", 11), PROTO_HELLO);
	assert_int_equal(type_of("PROTO_STARTED", 13), PROTO_STARTED);
	assert_int_equal(type_of("PROTO_HELL", 10), 0);
	assert_int_equal(type_of("PROTO_TYPE_MAX_", 15), 0);
	assert_int_equal(type_of("HELLO", 5), 0);
}

static void test_herd_table(void **state)
{
	(void)state;
	expect_table("launcher", "herd", "an agent", to_herd);
}

static void test_agent_table(void **state)
{
	(void)state;
	expect_table("agent", "herd-agent", "herd", to_agent);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rules_complete),
	    cmocka_unit_test(test_type_of),
	    cmocka_unit_test(test_herd_table),
	    cmocka_unit_test(test_agent_table),
	};

	find_root();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
