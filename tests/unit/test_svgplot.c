/* test_svgplot.c — the SVG plot module: ticks, number and time labels,
 * downsampling that keeps spikes, escaping, and charts that hold their
 * point bound and escape every string. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "herd/svgplot.h"

static void test_ticks(void **state)
{
	double t[32];
	size_t n;

	(void)state;
	n = svgplot_ticks(0, 100, 5, t, 32);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++)
		assert_true(fabs(t[i] - 20.0 * (double)i) < 1e-9);
	n = svgplot_ticks(0, 7, 5, t, 32);
	assert_int_equal(n, 8); /* 1.4 a step rounds to 1 */
	assert_true(fabs(t[7] - 7) < 1e-9);
	n = svgplot_ticks(0, 12, 5, t, 32);
	assert_int_equal(n, 7); /* 2.4 a step rounds to 2 */
	assert_true(fabs(t[6] - 12) < 1e-9);
	n = svgplot_ticks(0.62, 0.78, 5, t, 32);
	assert_true(n >= 3 && n <= 9);
	for (size_t i = 0; i < n; i++)
		assert_true(t[i] >= 0.62 - 1e-9 && t[i] <= 0.78 + 1e-9);
	/* -0 never shows. */
	n = svgplot_ticks(-1, 1, 4, t, 32);
	for (size_t i = 0; i < n; i++)
		if (t[i] == 0)
			assert_false(signbit(t[i]));
	/* An empty range gives its one value; a bound is kept. */
	assert_int_equal(svgplot_ticks(5, 5, 5, t, 32), 1);
	assert_int_equal(svgplot_ticks(0, 1e9, 1000000, t, 32), 32);
}

static void test_time_ticks(void **state)
{
	double t[32];
	size_t n;

	(void)state;
	n = svgplot_time_ticks(0, 300, 6, t, 32);
	assert_int_equal(n, 6); /* every minute */
	assert_true(fabs(t[1] - 60) < 1e-9);
	n = svgplot_time_ticks(0, 7200, 6, t, 32);
	assert_true(n >= 4 && n <= 10);
	assert_true(fmod(t[1] - t[0], 300) == 0); /* whole minutes */
	n = svgplot_time_ticks(0, 10 * 86400, 6, t, 32);
	assert_true(n >= 3 && n <= 12);
	assert_true(fmod(t[1] - t[0], 86400) == 0);
	n = svgplot_time_ticks(0, 2, 6, t, 32); /* under a second a tick */
	assert_true(n >= 3);
}

static void test_format(void **state)
{
	char b[48];

	(void)state;
	svgplot_format(b, sizeof(b), 0, SVGPLOT_PLAIN);
	assert_string_equal(b, "0");
	svgplot_format(b, sizeof(b), 950, SVGPLOT_PLAIN);
	assert_string_equal(b, "950");
	svgplot_format(b, sizeof(b), 1234, SVGPLOT_PLAIN);
	assert_string_equal(b, "1.23k");
	svgplot_format(b, sizeof(b), 50e6, SVGPLOT_PLAIN);
	assert_string_equal(b, "50M");
	svgplot_format(b, sizeof(b), 1.2e9, SVGPLOT_BYTES_PER_S);
	assert_string_equal(b, "1.2 GB/s");
	svgplot_format(b, sizeof(b), 0, SVGPLOT_BYTES_PER_S);
	assert_string_equal(b, "0 B/s");
	svgplot_format(b, sizeof(b), 91.5, SVGPLOT_PERCENT);
	assert_string_equal(b, "91.5 %");
	svgplot_format(b, sizeof(b), -2.5, SVGPLOT_PLAIN);
	assert_string_equal(b, "-2.5");
	svgplot_format(b, sizeof(b), 0.001, SVGPLOT_PLAIN);
	assert_string_equal(b, "0.001");
	svgplot_format(b, sizeof(b), 1e30, SVGPLOT_PLAIN);
	assert_non_null(strchr(b, 'E'));
}

static void test_elapsed(void **state)
{
	char b[48];

	(void)state;
	svgplot_format_elapsed(b, sizeof(b), 5);
	assert_string_equal(b, "0:05");
	svgplot_format_elapsed(b, sizeof(b), 750);
	assert_string_equal(b, "12:30");
	svgplot_format_elapsed(b, sizeof(b), 3723);
	assert_string_equal(b, "1:02:03");
	svgplot_format_elapsed(b, sizeof(b), 2 * 86400 + 3 * 3600 + 59);
	assert_string_equal(b, "2d 03h");
	svgplot_format_elapsed(b, sizeof(b), -65);
	assert_string_equal(b, "-1:05");
}

static void test_downsample(void **state)
{
	enum { N = 100000 };
	double *x = malloc(N * sizeof(*x)), *y = malloc(N * sizeof(*y));
	double ox[SVGPLOT_POINTS_MAX], oy[SVGPLOT_POINTS_MAX];
	size_t n;
	int spike = 0, dip = 0;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		x[i] = (double)i;
		y[i] = 1.0 + 0.1 * sin((double)i / 100.0);
	}
	y[54321] = 50;	/* one sample long: must survive */
	y[7777] = -3;
	n = svgplot_downsample(x, y, 10, SVGPLOT_POINTS_MAX, ox, oy);
	assert_int_equal(n, 10);
	assert_memory_equal(oy, y, 10 * sizeof(*y));
	n = svgplot_downsample(x, y, N, SVGPLOT_POINTS_MAX, ox, oy);
	assert_true(n <= SVGPLOT_POINTS_MAX);
	assert_true(n >= SVGPLOT_POINTS_MAX / 2);
	for (size_t i = 0; i < n; i++) {
		if (i)
			assert_true(ox[i] > ox[i - 1]);
		spike |= oy[i] == 50;
		dip |= oy[i] == -3;
	}
	assert_true(spike && dip);
	free(x);
	free(y);
}

/* open_memstream sets buf at fclose: the caller keeps buf. */
#define CAPTURE(f, buf, len)                                                   \
	do {                                                                   \
		(buf) = NULL;                                                  \
		(f) = open_memstream(&(buf), &(len));                          \
		assert_non_null(f);                                            \
	} while (0)

static void test_escape(void **state)
{
	size_t len;
	char *buf;
	FILE *f;

	(void)state;
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_escape(f, "a<b>&\"c\" 'd'\x01"), 0);
	assert_int_equal(svgplot_escape(f, NULL), 0);
	fclose(f);
	assert_string_equal(buf, "a&lt;b&gt;&amp;&quot;c&quot; &#39;d&#39;?");
	free(buf);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_lines(void **state)
{
	enum { N = 50000 };
	double *x = malloc(N * sizeof(*x)), *y = malloc(N * sizeof(*y));
	struct svgplot_axes ax = {.title = "loss <of> node&1",
				  .width = 400,
				  .height = 200,
				  .unit = SVGPLOT_PLAIN};
	struct svgplot_line l[2] = {
	    {.label = "a\"b", .color = "#1f77b4", .x = x, .y = y, .n = N},
	    {.label = "empty", .color = "#2ca02c", .x = x, .y = y, .n = 0}};
	const char *p;
	size_t len, commas = 0;
	char *buf;
	FILE *f;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		x[i] = (double)i;
		y[i] = i == 100 ? NAN : 4.0 / (1 + (double)i / 1000);
	}
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_lines(f, &ax, l, 2), 0);
	fclose(f);
	assert_non_null(strstr(buf, "<svg "));
	assert_non_null(strstr(buf, "</svg>"));
	assert_non_null(strstr(buf, "loss &lt;of&gt; node&amp;1"));
	assert_non_null(strstr(buf, "a&quot;b"));
	assert_null(strstr(buf, "<of>"));
	assert_null(strstr(buf, "nan"));
	assert_int_equal(count(buf, "<polyline"), 1); /* the empty line: none */
	assert_null(strstr(buf, ">empty<"));
	p = strstr(buf, "points=\"");
	assert_non_null(p);
	for (p += 8; *p && *p != '"'; p++)
		commas += *p == ',';
	assert_true(commas <= SVGPLOT_POINTS_MAX);
	assert_true(commas > 100);
	/* Time labels on x. */
	assert_non_null(strstr(buf, ">0:00<"));
	free(buf);

	/* No points: says so, draws no line. */
	l[0].n = 0;
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_lines(f, &ax, l, 1), 0);
	fclose(f);
	assert_non_null(strstr(buf, "no data"));
	assert_null(strstr(buf, "<polyline"));
	free(buf);

	/* One point: a dot; a flat line: a range around it. */
	l[0].n = 1;
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_lines(f, &ax, l, 1), 0);
	fclose(f);
	assert_non_null(strstr(buf, "<circle"));
	free(buf);
	free(x);
	free(y);
}

/* x as plain numbers (a step axis) and dashed marks with escaped hover
 * text; a mark outside the x range is not drawn. */
static void test_lines_step_axis(void **state)
{
	double x[] = {100, 200, 300, 400}, y[] = {4, 3, 2, 1};
	struct svgplot_vline v[] = {
	    {.x = 250, .label = "failed: <n1>", .color = "#c44e52"},
	    {.x = 9000, .label = "outside", .color = "#4c72b0"}};
	struct svgplot_axes ax = {.width = 400,
				  .height = 200,
				  .unit = SVGPLOT_PLAIN,
				  .x_label = "step",
				  .vlines = v,
				  .n_vlines = 2};
	struct svgplot_line l = {.color = "#1f77b4", .x = x, .y = y, .n = 4};
	size_t len;
	char *buf;
	FILE *f;

	(void)state;
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_lines(f, &ax, &l, 1), 0);
	fclose(f);
	assert_non_null(strstr(buf, ">step</text>"));
	assert_non_null(strstr(buf, ">200</text>"));
	assert_null(strstr(buf, ">0:00<")); /* no time labels */
	assert_int_equal(count(buf, "class=\"vline\""), 1);
	assert_non_null(strstr(buf, "<title>failed: &lt;n1&gt;</title>"));
	assert_null(strstr(buf, "outside"));
	free(buf);
}

static void test_timeline(void **state)
{
	const char *const rows[] = {"attempts", "node <failed>"};
	struct svgplot_span s[] = {
	    {.x0 = 0, .x1 = 100, .row = 0, .label = "attempt 1: a&b",
	     .color = "#c44e52"},
	    {.x0 = 100, .x1 = 100, .row = 0, .label = NULL, .color = "#55a868"}};
	struct svgplot_mark m[] = {
	    {.x = 50, .row = 1, .label = "node_failed n1: <x>", .color = "#c44e52"}};
	struct svgplot_axes ax = {.title = "timeline", .width = 800,
				  .height = 120};
	size_t len;
	char *buf;
	FILE *f;

	(void)state;
	CAPTURE(f, buf, len);
	assert_int_equal(svgplot_timeline(f, &ax, rows, 2, s, 2, m, 1), 0);
	fclose(f);
	assert_non_null(strstr(buf, "node &lt;failed&gt;"));
	assert_non_null(strstr(buf, "attempt 1: a&amp;b"));
	assert_non_null(strstr(buf, "node_failed n1: &lt;x&gt;"));
	assert_int_equal(count(buf, "<path "), 1);
	assert_null(strstr(buf, "<x>"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ticks),      cmocka_unit_test(test_time_ticks),
	    cmocka_unit_test(test_format),     cmocka_unit_test(test_elapsed),
	    cmocka_unit_test(test_downsample), cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_lines),      cmocka_unit_test(test_timeline),
	    cmocka_unit_test(test_lines_step_axis),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
