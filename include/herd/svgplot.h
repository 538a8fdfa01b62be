/* svgplot.h — small SVG charts drawn by herd for `herd report`: line
 * plots with readable ticks (time on x as elapsed h:mm:ss, values with SI
 * prefixes on y) and a timeline of spans and marks.  The SVG is inline
 * markup for an HTML page: no script, no external resource, every string
 * escaped (svgplot_escape), every line at most two points per pixel
 * column of its plot and never more than SVGPLOT_POINTS_MAX
 * (svgplot_downsample keeps each bucket's min and max, so spikes stay).
 *
 * Output goes to the caller's FILE (open_memstream or a file); functions
 * return 0, or -1 when it reports an error.
 */
#ifndef HERD_SVGPLOT_H
#define HERD_SVGPLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Points per drawn line: a chart 600 px wide cannot show more. */
#define SVGPLOT_POINTS_MAX 1000

enum svgplot_unit {
	SVGPLOT_PLAIN,	     /* 1.5, 12k, 3.4M */
	SVGPLOT_PERCENT,     /* 0..100, "80 %" */
	SVGPLOT_BYTES_PER_S, /* "1.2 GB/s" */
};

struct svgplot_line {
	const char *label; /* legend text, or NULL */
	const char *color; /* "#1f77b4": a CSS colour, not escaped */
	const double *x;   /* seconds since the start of the run */
	const double *y;
	size_t n;
};

/* A vertical line across a line chart at x (an attempt's start, a
 * failure), dashed, with title (hover) text. */
struct svgplot_vline {
	double x;
	const char *label; /* title text, or NULL */
	const char *color;
};

struct svgplot_axes {
	const char *title; /* or NULL */
	int width, height; /* pixels of the whole chart */
	double x_min, x_max; /* seconds; x_max <= x_min: from the data */
	enum svgplot_unit unit;
	bool y_from_zero; /* include 0 on y */
	const char *x_label; /* x is not time: plain numbers ("step") */
	const struct svgplot_vline *vlines; /* drawn by svgplot_lines */
	size_t n_vlines;
};

/* A line chart.  Lines with no points are left out of the plot (a chart
 * without any says "no data"). */
int svgplot_lines(FILE *out, const struct svgplot_axes *ax,
		  const struct svgplot_line *lines, size_t n_lines);

/* The timeline: rows named row_names (left), spans (a bar from x0 to x1
 * on its row) and marks (a diamond at x on its row, with title text). */
struct svgplot_span {
	double x0, x1;
	int row;
	const char *label; /* drawn in the bar when it fits, and as title */
	const char *color;
};
struct svgplot_mark {
	double x;
	int row;
	const char *label; /* title (hover) text */
	const char *color;
};
int svgplot_timeline(FILE *out, const struct svgplot_axes *ax,
		     const char *const *row_names, int n_rows,
		     const struct svgplot_span *spans, size_t n_spans,
		     const struct svgplot_mark *marks, size_t n_marks);

/* Writes s with & < > " ' escaped: safe in HTML/SVG text and attribute
 * values.  NULL writes nothing. */
int svgplot_escape(FILE *out, const char *s);

/* Tick values for [lo, hi]: steps of 1, 2 or 5 times a power of ten, about
 * target of them.  Writes at most max into ticks; returns the count. */
size_t svgplot_ticks(double lo, double hi, int target, double *ticks,
		     size_t max);

/* The same for seconds: steps of 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15,
 * 30 min, 1, 2, 3, 6, 12 h, then days. */
size_t svgplot_time_ticks(double lo, double hi, int target, double *ticks,
			  size_t max);

/* "950", "1.2k", "3.4M", "-2.5", "0.001"; with unit "B/s" appended. */
void svgplot_format(char *buf, size_t len, double v, enum svgplot_unit unit);

/* Seconds as "0:05", "12:30", "1:02:03", "2d 03h". */
void svgplot_format_elapsed(char *buf, size_t len, double s);

/* Copies (x, y) into (ox, oy), at most max points (max >= 2): when n >
 * max the points are cut into max/2 buckets of equal count and each
 * bucket gives its minimum and maximum in x order.  Returns the count. */
size_t svgplot_downsample(const double *x, const double *y, size_t n,
			  size_t max, double *ox, double *oy);

#endif
