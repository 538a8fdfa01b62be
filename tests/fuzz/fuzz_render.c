/* fuzz_render.c — libFuzzer target for lib/render: the input is a
 * template, rendered strict and lenient with two fixed values, and as
 * shell text (render_shell) with a hostile value and shell words.  A
 * template with no "{{" must come back unchanged; a failure must say why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct render_var vars[] = {{"name", "job"},
						 {"a.b", "{{name}}"}};
	char *tmpl = strndup((const char *)data, size);
	struct herd_err err;

	if (!tmpl)
		return 0;
	for (int strict = 0; strict < 2; strict++) {
		char *out;

		err.text[0] = '\0';
		out = render_text(tmpl, vars, 2, strict, &err);
		if (!out && !err.text[0])
			abort();
		if (out && !strstr(tmpl, "{{") && strcmp(out, tmpl) != 0)
			abort();
		free(out);
	}
	{
		static const struct render_var sh[] = {
		    {"checkpoint", "a'b\"c;$(x)`y`\\"}, {"resume_args", "--r 'v'"}};
		char *out;

		err.text[0] = '\0';
		out = render_shell(tmpl, sh, 2, "resume_args", &err);
		if (!out && !err.text[0])
			abort();
		if (out && !strstr(tmpl, "{{") && strcmp(out, tmpl) != 0)
			abort();
		free(out);
	}
	free(tmpl);
	return 0;
}
