#!/bin/sh
# t0028-docs.t — the documentation holds together: README.md is short
# (at most 260 lines) and starts with the two commands, make demo and
# make check; every relative link of README.md and doc/ leads to a file
# that exists, and its #fragment to one of that file's headings
# (scripts/doclinks.py, which is shown to catch a broken link); the
# guides README.md names are there.

test_description='README.md and doc/: length, the first commands, links'

. "$(dirname "$0")/test-lib.sh"

require_cmd python3

LINKS=$HERD_ROOT/scripts/doclinks.py

test_expect_success 'README.md has at most 260 lines' '
	n=$(wc -l <"$HERD_ROOT/README.md") &&
	echo "README.md: $n lines" &&
	test "$n" -le 260
'

test_expect_success 'the first two commands of README.md are make demo and make check' '
	sed -n "/^\`\`\`sh$/,/^\`\`\`$/{/^make /p;}" "$HERD_ROOT/README.md" |
		sed -n "1,2s/^\(make [a-z]*\).*/\1/p" >got &&
	printf "make demo\nmake check\n" >want &&
	test_cmp want got &&
	first=$(grep -n "^\`\`\`" "$HERD_ROOT/README.md" | sed -n "1s/:.*//p") &&
	test "$first" -le 5 &&
	sed -n "$((first + 1))p" "$HERD_ROOT/README.md" | grep "^make demo" &&
	sed -n "/^make demo/,/^\`\`\`$/p" "$HERD_ROOT/README.md" | grep "^make check"
'

test_expect_success 'every relative link of README.md and doc/ leads to a file and a heading' '
	(cd "$HERD_ROOT" && python3 "$LINKS" README.md doc/*.md doc/design/*.md) >bad;
	rc=$? &&
	cat bad &&
	test_must_be_empty bad &&
	test $rc -eq 0
'

test_expect_success 'the link check names a missing file and a missing heading' '
	mkdir -p d/sub &&
	printf "# Top\n\n## A heading: \`x.y\`\n" >d/sub/there.md &&
	cat >d/page.md <<-\EOF &&
	# Page

	[fine](sub/there.md) [fine too](sub/there.md#a-heading-xy) [self](#page)
	[web](https://example.org/x) `[code](nowhere.md)`

	```
	[in a block](nowhere.md)
	```

	[gone](sub/missing.md) and [no heading](sub/there.md#nope)
	EOF
	test_expect_code 1 python3 "$LINKS" d/page.md >out &&
	cat out &&
	test $(wc -l <out) -eq 2 &&
	grep "^d/page.md:10: sub/missing.md: no such file" out &&
	grep "^d/page.md:10: sub/there.md#nope: .*has no heading #nope" out
'

test_expect_success 'the guides README.md links to are there' '
	for f in running failures watching long-jobs mpi slurm projects security \
		install keys design/architecture design/protocol design/DESIGN \
		design/STYLE; do
		test -s "$HERD_ROOT/doc/$f.md" || { echo "no doc/$f.md"; return 1; }
		grep -q "(doc/$f.md" "$HERD_ROOT/README.md" ||
			{ echo "README.md does not link doc/$f.md"; return 1; }
	done
'

test_expect_success 'doc/keys.md has the key table herd.yaml(5) is made from' '
	grep -x "### Every key" "$HERD_ROOT/doc/keys.md" &&
	sed -n "/^### Every key$/,/^#/p" "$HERD_ROOT/doc/keys.md" |
		grep -c "^| \`" >rows &&
	test $(cat rows) -ge 60
'

test_done
