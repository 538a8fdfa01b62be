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
		    {"checkpoint", "a'b\"c;$(x)`y`\\"},
		    {"resume_args", "--r 'v'"}};
		char *out;

		err.text[0] = '\0';
		static const struct render_var plain[] = {
		    {"checkpoint", "SAFE"}, {"resume_args", "--r 'v'"}};
		char *safe;

		out = render_shell(tmpl, sh, 2, "resume_args", &err);
		if (!out && !err.text[0])
			abort();
		if (out && !strstr(tmpl, "{{") && strcmp(out, tmpl) != 0)
			abort();
		/* Whether a template is refused depends on the template,
		 * never on the value (which is data).  (That the value is
		 * one argument is checked by running dash and bash on
		 * generated templates in tests/unit/test_render.c: a fuzzer
		 * input is never given to a shell.) */
		safe = render_shell(tmpl, plain, 2, "resume_args", &err);
		if (!out != !safe)
			abort();
		free(safe);
		free(out);
	}
	free(tmpl);
	return 0;
}
