/* test_warm.c — which commands the warm path takes (agent/warm.c,
 * warm_command_parse): the words as sh reads them where that is plain,
 * and nothing else.  Links the agent's objects but main.o (agent_send is
 * tests/unit/agent_stub.c's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "tests/unit/agent_stub.h"

static void takes(const char *cmd, const char *python, const char *flags,
		  const char *script, size_t n_args)
{
	struct warm_cmd c;

	assert_int_equal(warm_command_parse(cmd, &c), 0);
	assert_string_equal(c.python, python);
	assert_string_equal(c.flags, flags);
	assert_string_equal(c.words[c.script_at], script);
	assert_int_equal(c.n_words - c.script_at - 1, n_args);
	warm_command_free(&c);
}

static void refuses(const char *cmd)
{
	struct warm_cmd c;

	assert_int_equal(warm_command_parse(cmd, &c), -1);
	assert_null(c.buf);
}

static void test_takes(void **state)
{
	(void)state;
	takes("python3 train.py --lr 0.1", "python3", "", "train.py", 2);
	takes("/usr/bin/python3 -u train.py", "/usr/bin/python3", "u",
	      "train.py", 0);
	takes("python -B -u t.py a=b", "python", "Bu", "t.py", 1);
	takes("python3.11\ttrain.py", "python3.11", "", "train.py", 0);
	takes("\"/usr/bin/python3\" \"/a b/train.py\" 'x y' z\"w\"",
	      "/usr/bin/python3", "", "/a b/train.py", 2);
	takes("  python3 train.py  ", "python3", "", "train.py", 0);
	takes("exec '/usr/bin/python3' train.py --steps 5", "/usr/bin/python3",
	      "", "train.py", 2);
}

static void test_refuses(void **state)
{
	(void)state;
	refuses(NULL);
	refuses("");
	refuses("python3");
	refuses("python3 -u");
	refuses("python3 -m torch.distributed.run train.py");
	refuses("python3 -O train.py");
	refuses("python3 -u -u train.py");
	refuses("python3 train.py | tee log");
	refuses("python3 train.py > log");
	refuses("python3 train.py; echo done");
	refuses("python3 train.py && echo done");
	refuses("python3 train.py $ARGS");
	refuses("python3 \"$HOME/train.py\"");
	refuses("python3 `pwd`/train.py");
	refuses("python3 train.py \\");
	refuses("python3 'train.py");
	refuses("python3 ~/train.py");
	refuses("python3 *.py");
	refuses("X=1 python3 train.py");
	refuses("exec exec python3 train.py");
	refuses("exec");
	refuses("python2 train.py");
	refuses("python3x train.py");
	refuses("python3. train.py");
	refuses("bash run.sh");
	refuses("python3 train.py # comment");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_takes),
	    cmocka_unit_test(test_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
