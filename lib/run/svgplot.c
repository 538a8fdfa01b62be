/* lib/run/svgplot.c — SVG line charts and a timeline; see svgplot.h. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/svgplot.h"

/* Margins of the plot area inside the chart, in pixels. */
#define M_LEFT 62
#define M_RIGHT 12
#define M_TOP 26
#define M_BOTTOM 38
#define TICKS_MAX 32

int svgplot_escape(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default:
			/* Control characters have no place in a page. */
			if ((unsigned char)*s < 0x20 && *s != '\t')
				fputc('?', out);
			else
				fputc(*s, out);
		}
	}
	return ferror(out) ? -1 : 0;
}

static size_t ticks_with_step(double lo, double hi, double step, double *ticks,
			      size_t max)
{
	size_t n = 0;
	double first = ceil(lo / step - 1e-9) * step;

	for (double v = first; v <= hi + step * 1e-9 && n < max; v += step) {
		/* -0 and 1e-17 print as 0. */
		ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	}
	return n;
}

size_t svgplot_ticks(double lo, double hi, int target, double *ticks,
		     size_t max)
{
	double range = hi - lo, raw, mag, f, step;

	if (!(range > 0) || !isfinite(range) || target < 1)
		return max ? (ticks[0] = lo, 1) : 0;
	raw = range / target;
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
	return ticks_with_step(lo, hi, step, ticks, max);
}

size_t svgplot_time_ticks(double lo, double hi, int target, double *ticks,
			  size_t max)
{
	static const double steps[] = {
	    1,	  2,	5,     10,    15,    30,    60,	   120,	  300,
	    600,  900,	1800,  3600,  7200,  10800, 21600, 43200, 86400};
	double range = hi - lo, raw, step = 0;

	if (!(range > 0) || !isfinite(range) || target < 1)
		return max ? (ticks[0] = lo, 1) : 0;
	raw = range / target;
	if (raw < 1)
		return svgplot_ticks(lo, hi, target, ticks, max);
	for (size_t i = 0; i < sizeof(steps) / sizeof(*steps); i++)
		if (steps[i] >= raw * 0.75) {
			step = steps[i];
			break;
		}
	if (!step)
		step = ceil(raw / 86400) * 86400;
	return ticks_with_step(lo, hi, step, ticks, max);
}

void svgplot_format(char *buf, size_t len, double v, enum svgplot_unit unit)
{
	static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E"};
	double a = fabs(v);
	int p = 0;
	char num[32];

	if (unit == SVGPLOT_PERCENT) {
		snprintf(buf, len, "%g %%", round(v * 10) / 10);
		return;
	}
	while (a >= 1000 && p < 6) {
		a /= 1000;
		v /= 1000;
		p++;
	}
	if (a == 0)
		snprintf(num, sizeof(num), "0");
	else if (a >= 100 || (p == 0 && a == floor(a)))
		snprintf(num, sizeof(num), "%.0f", v);
	else
		snprintf(num, sizeof(num), "%.3g", v);
	if (unit == SVGPLOT_BYTES_PER_S)
		snprintf(buf, len, "%s %sB/s", num, pre[p]);
	else
		snprintf(buf, len, "%s%s", num, pre[p]);
}

void svgplot_format_elapsed(char *buf, size_t len, double s)
{
	long long t = (long long)llround(s < 0 ? -s : s);
	const char *sign = s < 0 && t ? "-" : "";

	if (t >= 86400)
		snprintf(buf, len, "%s%lldd %02lldh", sign, t / 86400,
			 t % 86400 / 3600);
	else if (t >= 3600)
		snprintf(buf, len, "%s%lld:%02lld:%02lld", sign, t / 3600,
			 t % 3600 / 60, t % 60);
	else
		snprintf(buf, len, "%s%lld:%02lld", sign, t / 60, t % 60);
}

size_t svgplot_downsample(const double *x, const double *y, size_t n,
			  size_t max, double *ox, double *oy)
{
	size_t buckets, out = 0;

	if (max < 2)
		max = 2;
	if (n <= max) {
		memcpy(ox, x, n * sizeof(*x));
		memcpy(oy, y, n * sizeof(*y));
		return n;
	}
	buckets = max / 2;
	for (size_t b = 0; b < buckets; b++) {
		size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
		size_t imin = lo, imax = lo;

		for (size_t i = lo; i < hi; i++) {
			if (y[i] < y[imin])
				imin = i;
			if (y[i] > y[imax])
				imax = i;
		}
		if (imin == imax) {
			ox[out] = x[imin];
			oy[out++] = y[imin];
			continue;
		}
		ox[out] = x[imin < imax ? imin : imax];
		oy[out++] = y[imin < imax ? imin : imax];
		ox[out] = x[imin < imax ? imax : imin];
		oy[out++] = y[imin < imax ? imax : imin];
	}
	return out;
}

struct frame {
	double x0, x1, y0, y1; /* data range */
	double px0, px1, py0, py1; /* pixel box: py0 at the top */
};

static double fx(const struct frame *f, double x)
{
	return f->px0 + (x - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0);
}

static double fy(const struct frame *f, double y)
{
	return f->py1 - (y - f->y0) / (f->y1 - f->y0) * (f->py1 - f->py0);
}

static void open_svg(FILE *out, const struct svgplot_axes *ax)
{
	fprintf(out,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" "
		"width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\" font-size=\"11\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
		ax->width, ax->height, ax->width, ax->height);
	if (ax->title) {
		fprintf(out, "<text x=\"%d\" y=\"16\" font-size=\"13\" "
			     "font-weight=\"bold\">",
			M_LEFT);
		svgplot_escape(out, ax->title);
		fputs("</text>\n", out);
	}
}

/* The x axis: time ticks (or plain numbers, named x_label), grid lines
 * and labels. */
static void x_axis(FILE *out, const struct frame *f, const char *x_label)
{
	double t[TICKS_MAX];
	size_t n = x_label ? svgplot_ticks(f->x0, f->x1, 6, t, TICKS_MAX)
			   : svgplot_time_ticks(f->x0, f->x1, 6, t, TICKS_MAX);
	char lab[32];

	if (x_label) {
		fprintf(out,
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
			"fill=\"#444\">",
			f->px1, f->py1 + 26);
		svgplot_escape(out, x_label);
		fputs("</text>\n", out);
	}
	for (size_t i = 0; i < n; i++) {
		double x = fx(f, t[i]);

		if (t[i] < f->x0 - 1e-9 || t[i] > f->x1 + 1e-9)
			continue;
		if (x_label)
			svgplot_format(lab, sizeof(lab), t[i], SVGPLOT_PLAIN);
		else
			svgplot_format_elapsed(lab, sizeof(lab), t[i]);
		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#e4e4e4\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
			"fill=\"#444\">%s</text>\n",
			x, f->py0, x, f->py1, x, f->py1 + 14, lab);
	}
	fprintf(out,
		"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		"stroke=\"#888\"/>\n",
		f->px0, f->py1, f->px1, f->py1);
}

int svgplot_lines(FILE *out, const struct svgplot_axes *ax,
		  const struct svgplot_line *lines, size_t n_lines)
{
	struct frame f = {.px0 = M_LEFT,
			  .px1 = ax->width - M_RIGHT,
			  .py0 = M_TOP,
			  .py1 = ax->height - M_BOTTOM};
	double *bx = NULL, *by = NULL, t[TICKS_MAX];
	double ymin = INFINITY, ymax = -INFINITY, xmin = INFINITY,
	       xmax = -INFINITY;
	size_t nt, points = 0, max_points;
	char lab[48];
	int rc = -1;

	for (size_t l = 0; l < n_lines; l++)
		for (size_t i = 0; i < lines[l].n; i++) {
			double x = lines[l].x[i], y = lines[l].y[i];

			if (!isfinite(x) || !isfinite(y))
				continue;
			points++;
			xmin = fmin(xmin, x);
			xmax = fmax(xmax, x);
			ymin = fmin(ymin, y);
			ymax = fmax(ymax, y);
		}
	open_svg(out, ax);
	if (!points) {
		fprintf(out,
			"<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
			"fill=\"#888\">no data</text>\n</svg>\n",
			ax->width / 2, ax->height / 2);
		return ferror(out) ? -1 : 0;
	}
	if (ax->x_max > ax->x_min) {
		xmin = ax->x_min;
		xmax = ax->x_max;
	}
	if (ax->y_from_zero) {
		ymin = fmin(ymin, 0);
		ymax = fmax(ymax, 0);
	}
	if (ax->unit == SVGPLOT_PERCENT && ymax <= 100 && ymin >= 0) {
		ymin = 0;
		ymax = 100;
	}
	if (xmax <= xmin)
		xmax = xmin + 1;
	if (ymax <= ymin) {
		double pad = ymin ? fabs(ymin) * 0.1 : 1;

		ymin -= pad;
		ymax += pad;
	}
	/* Round the y range out to whole ticks. */
	nt = svgplot_ticks(ymin, ymax, 5, t, TICKS_MAX);
	if (nt >= 2) {
		double step = t[1] - t[0];

		ymin = fmin(ymin, t[0]);
		ymax = fmax(ymax, t[nt - 1]);
		if (t[0] > ymin + 1e-12)
			ymin = t[0] - step;
		if (t[nt - 1] < ymax - 1e-12)
			ymax = t[nt - 1] + step;
		nt = svgplot_ticks(ymin, ymax, 5, t, TICKS_MAX);
	}
	f.x0 = xmin;
	f.x1 = xmax;
	f.y0 = ymin;
	f.y1 = ymax;
	for (size_t i = 0; i < nt; i++) {
		double y = fy(&f, t[i]);

		svgplot_format(lab, sizeof(lab), t[i], ax->unit);
		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#e4e4e4\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
			"fill=\"#444\">%s</text>\n",
			f.px0, y, f.px1, y, f.px0 - 4, y + 4, lab);
	}
	fprintf(out,
		"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		"stroke=\"#888\"/>\n",
		f.px0, f.py0, f.px0, f.py1);
	x_axis(out, &f, ax->x_label);
	for (size_t i = 0; i < ax->n_vlines; i++) {
		const struct svgplot_vline *v = &ax->vlines[i];
		double x;

		if (!isfinite(v->x) || v->x < xmin || v->x > xmax)
			continue;
		x = fx(&f, v->x);
		fprintf(out,
			"<line class=\"vline\" x1=\"%.1f\" y1=\"%.1f\" "
			"x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"1.5\" stroke-dasharray=\"4 3\">",
			x, f.py0, x, f.py1, v->color);
		if (v->label) {
			fputs("<title>", out);
			svgplot_escape(out, v->label);
			fputs("</title>", out);
		}
		fputs("</line>\n", out);
	}

	/* Two points a pixel column show every rise and fall (min and max
	 * of each bucket); more only make the file bigger. */
	max_points = (size_t)(2 * (f.px1 - f.px0));
	if (max_points > SVGPLOT_POINTS_MAX)
		max_points = SVGPLOT_POINTS_MAX;
	if (max_points < 2)
		max_points = 2;
	bx = malloc(SVGPLOT_POINTS_MAX * sizeof(*bx));
	by = malloc(SVGPLOT_POINTS_MAX * sizeof(*by));
	if (!bx || !by)
		goto out;
	for (size_t l = 0; l < n_lines; l++) {
		size_t n = svgplot_downsample(lines[l].x, lines[l].y,
					      lines[l].n, max_points, bx, by);
		int first = 1;

		if (!n)
			continue;
		fprintf(out,
			"<polyline fill=\"none\" stroke=\"%s\" "
			"stroke-width=\"2\" stroke-linejoin=\"round\" "
			"points=\"",
			lines[l].color);
		for (size_t i = 0; i < n; i++) {
			if (!isfinite(bx[i]) || !isfinite(by[i]))
				continue;
			fprintf(out, "%s%.1f,%.1f", first ? "" : " ",
				fx(&f, bx[i]), fy(&f, by[i]));
			first = 0;
		}
		fputs("\"/>\n", out);
		if (n == 1)
			fprintf(out,
				"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
				"fill=\"%s\"/>\n",
				fx(&f, bx[0]), fy(&f, by[0]), lines[l].color);
	}
	/* Legend, top right. */
	{
		double x = f.px1;

		for (size_t l = n_lines; l-- > 0;) {
			size_t w;

			if (!lines[l].label || !lines[l].n)
				continue;
			w = strlen(lines[l].label) * 6 + 22;
			x -= (double)w;
			fprintf(out,
				"<rect x=\"%.1f\" y=\"8\" width=\"12\" "
				"height=\"4\" fill=\"%s\"/>"
				"<text x=\"%.1f\" y=\"14\" fill=\"#333\">",
				x, lines[l].color, x + 15);
			svgplot_escape(out, lines[l].label);
			fputs("</text>\n", out);
		}
	}
	fputs("</svg>\n", out);
	rc = ferror(out) ? -1 : 0;
out:
	free(bx);
	free(by);
	return rc;
}

int svgplot_timeline(FILE *out, const struct svgplot_axes *ax,
		     const char *const *row_names, int n_rows,
		     const struct svgplot_span *spans, size_t n_spans,
		     const struct svgplot_mark *marks, size_t n_marks)
{
	struct frame f = {.px0 = 96,
			  .px1 = ax->width - M_RIGHT,
			  .py0 = M_TOP,
			  .py1 = ax->height - M_BOTTOM};
	double xmin = ax->x_min, xmax = ax->x_max, row_h;

	if (!(xmax > xmin)) {
		xmin = INFINITY;
		xmax = -INFINITY;
		for (size_t i = 0; i < n_spans; i++) {
			xmin = fmin(xmin, spans[i].x0);
			xmax = fmax(xmax, spans[i].x1);
		}
		for (size_t i = 0; i < n_marks; i++) {
			xmin = fmin(xmin, marks[i].x);
			xmax = fmax(xmax, marks[i].x);
		}
		if (!isfinite(xmin)) {
			xmin = 0;
			xmax = 1;
		}
	}
	if (xmax <= xmin)
		xmax = xmin + 1;
	f.x0 = xmin;
	f.x1 = xmax;
	f.y0 = 0;
	f.y1 = n_rows > 0 ? n_rows : 1;
	row_h = (f.py1 - f.py0) / f.y1;
	open_svg(out, ax);
	for (int r = 0; r < n_rows; r++) {
		double y = f.py0 + row_h * r;

		fprintf(out,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			"height=\"%.1f\" fill=\"%s\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
			"fill=\"#333\">",
			f.px0, y, f.px1 - f.px0, row_h,
			r % 2 ? "#ffffff" : "#f4f4f4", f.px0 - 6,
			y + row_h / 2 + 4);
		svgplot_escape(out, row_names[r]);
		fputs("</text>\n", out);
	}
	x_axis(out, &f, NULL);
	for (size_t i = 0; i < n_spans; i++) {
		const struct svgplot_span *s = &spans[i];
		double x0 = fx(&f, fmax(s->x0, xmin)),
		       x1 = fx(&f, fmin(s->x1, xmax));
		double y = f.py0 + row_h * s->row + row_h * 0.15;

		if (x1 - x0 < 2)
			x1 = x0 + 2;
		fprintf(out,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			"height=\"%.1f\" rx=\"3\" fill=\"%s\"><title>",
			x0, y, x1 - x0, row_h * 0.7, s->color);
		svgplot_escape(out, s->label);
		fputs("</title></rect>\n", out);
		if (s->label && (x1 - x0) > strlen(s->label) * 6.5 + 6) {
			fprintf(out,
				"<text x=\"%.1f\" y=\"%.1f\" fill=\"#fff\">",
				x0 + 4, y + row_h * 0.35 + 4);
			svgplot_escape(out, s->label);
			fputs("</text>\n", out);
		}
	}
	for (size_t i = 0; i < n_marks; i++) {
		const struct svgplot_mark *m = &marks[i];
		double x = fx(&f, m->x), y = f.py0 + row_h * (m->row + 0.5);
		double r = fmin(7, row_h * 0.35);

		fprintf(out,
			"<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" "
			"fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\">"
			"<title>",
			x, y - r, x + r, y, x, y + r, x - r, y, m->color);
		svgplot_escape(out, m->label);
		fputs("</title></path>\n", out);
	}
	fputs("</svg>\n", out);
	return ferror(out) ? -1 : 0;
}
