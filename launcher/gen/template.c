/* template.c — finding and reading job templates; see template.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "herd/file.h"
#include "herd/spec.h"
#include "launcher/gen/template.h"

int template_dir(const char *self, char *dir, size_t size, struct herd_err *err)
{
	static const char *const dirs[] = {"../templates",
					   "../share/herd/templates"};
	char tried[2][PATH_MAX];
	char *copy = strdup(self), *bin;
	struct stat st;

	if (!copy)
		return herd_errprintf(err, "out of memory");
	bin = dirname(copy);
	for (size_t i = 0; i < 2; i++) {
		snprintf(tried[i], sizeof(tried[i]), "%s/%s", bin, dirs[i]);
		if (stat(tried[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			char real[PATH_MAX];

			/* "/usr/share/herd/templates", not ".../bin/../..." */
			snprintf(dir, size, "%s",
				 realpath(tried[i], real) ? real : tried[i]);
			free(copy);
			return 0;
		}
	}
	free(copy);
	return herd_errprintf(err,
			      "cannot find herd's templates: neither %s nor "
			      "%s is a directory",
			      tried[0], tried[1]);
}

char *template_read(const char *path, struct herd_err *err)
{
	size_t len;
	char *text = file_read(path, TEMPLATE_MAX, &len);

	if (!text) {
		herd_errprintf(err, "%s: %s", path,
			       errno == EFBIG	 ? "larger than 4 MiB"
			       : errno == EINVAL ? "not a regular file"
						 : strerror(errno));
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		herd_errprintf(err, "%s: holds a NUL byte", path);
		free(text);
		return NULL;
	}
	return text;
}

char *template_load(const char *self, const char *name, struct herd_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX + 256];

	if (template_dir(self, dir, sizeof(dir), err) < 0)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return template_read(path, err);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

int template_check(const char *name, const char *text, struct herd_err *err)
{
	if (ends_with(name, ".json")) {
		json_error_t jerr;
		json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);

		if (!j)
			return herd_errprintf(err,
					      "%s:%d:%d: the rendered file is "
					      "not JSON: %s (a value given "
					      "with --set may need quotes)",
					      name, jerr.line, jerr.column,
					      jerr.text);
		json_decref(j);
		return 0;
	}
	if (ends_with(name, ".yaml") || ends_with(name, ".yml")) {
		struct spec *spec = spec_parse(text, strlen(text), name, err);

		if (!spec)
			return -1;
		spec_free(spec);
	}
	return 0;
}
