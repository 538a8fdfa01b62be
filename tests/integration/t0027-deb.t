#!/bin/sh
# t0027-deb.t — `make deb` builds the Debian package from a fresh copy of
# the tree (debian/, dpkg-buildpackage -us -uc -b); lintian finds no
# error; the package holds the layout of DESIGN.md under /usr, with
# binaries that carry no RUNPATH; unpacked into a scratch root
# (dpkg-deb -x, nothing is installed on this machine) its herd works with
# no source tree: --version, templates, init and validate, a local job
# and a PMIx job.

test_description='make deb: the Debian package, lintian, and the unpacked herd'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/install/lib.sh"

require_cmd git tar make python3 mandoc dpkg-buildpackage dpkg-deb lintian \
	dh readelf
[ -x "$HERD_ROOT/build/examples/allreduce" ] ||
	error "prerequisite build/examples/allreduce is missing (run 'make examples')"

version=$(sed -n 's/^#define HERD_VERSION "\(.*\)"/\1/p' \
	"$HERD_ROOT/include/herd/version.h")
arch=$(dpkg --print-architecture)
DEB=src/build/deb/herd_${version}_$arch.deb

test_expect_success 'make deb from a fresh copy of the tree' '
	copy_tree src &&
	{ make -C src deb >log 2>&1 || { tail -60 log; false; }; } &&
	test -s "$DEB"
'

test_expect_success 'lintian: no errors (the report is printed)' '
	cat src/build/deb/lintian.txt &&
	! grep "^E:" src/build/deb/lintian.txt
'

test_expect_success 'the package: name, version, dependencies' '
	dpkg-deb -f "$DEB" Package Version Architecture >got &&
	printf "Package: herd\nVersion: %s\nArchitecture: %s\n" "$version" "$arch" >expect &&
	test_cmp expect got &&
	dpkg-deb -f "$DEB" Depends >deps &&
	grep "libyaml" deps && grep "libssh" deps && grep "libjansson" deps
'

test_expect_success 'its files: the layout under /usr' '
	dpkg-deb -c "$DEB" | awk "{print \$6}" | sed "s|^\./|/|" >files &&
	for f in /usr/bin/herd /usr/bin/herd-agent \
		/usr/share/herd/templates/sbatch.sh.tmpl \
		/usr/share/herd/templates/init/pretrain/manifest.json \
		/usr/share/herd/python/herd/ \
		/usr/share/man/man1/herd.1.gz /usr/share/man/man1/herd-run.1.gz \
		/usr/share/man/man1/herd-agent.1.gz \
		/usr/share/man/man5/herd.yaml.5.gz \
		/usr/share/bash-completion/completions/herd \
		/usr/share/doc/herd/copyright; do
		grep -qx "$f" files || { echo "missing $f"; return 1; }
	done &&
	for c in $(herd --help | sed -n "s/^  herd \([a-z]*\) .*/\1/p" | sort -u); do
		grep -qx "/usr/share/man/man1/herd-$c.1.gz" files ||
			{ echo "no page for $c"; return 1; }
	done &&
	! grep -v -e "^/usr/" -e "^/$" files
'

test_expect_success 'unpacked into a scratch root: no RUNPATH, pages that lint clean' '
	dpkg-deb -x "$DEB" root &&
	for b in root/usr/bin/herd root/usr/bin/herd-agent; do
		readelf -d "$b" >dyn &&
		! grep -E "RUNPATH|RPATH" dyn || return 1
	done &&
	# The agent runs on nodes outside Slurm too: no libslurm there.
	readelf -d root/usr/bin/herd-agent >dyn &&
	grep -q "NEEDED.*libc\.so" dyn &&
	! grep "NEEDED.*libslurm" dyn &&
	mkdir pages &&
	for p in root/usr/share/man/man*/*.gz; do
		gzip -dc "$p" >"pages/$(basename "$p" .gz)" || return 1
	done &&
	mandoc -T lint -W warning pages/* >lint 2>&1 &&
	test_must_be_empty lint
'

test_expect_success 'the unpacked herd works without the source tree' '
	mv src src.away &&
	installed_checks "$PWD/root" /usr;
	rc=$? &&
	mv src.away src &&
	test $rc -eq 0
'

test_done
