# lib.sh — helpers of the install tests (t0026 make install, t0027 the
# Debian package); POSIX sh, sourced after test-lib.sh.
#
#   copy_tree DIR        the source tree as a fresh checkout has it (git's
#                        tracked and untracked-but-not-ignored files) in
#                        DIR: a build there never touches $HERD_ROOT's
#                        objects, which the other tests run
#   installed_checks ROOT PREFIX
#                        the checks every install passes, with ROOT/PREFIX
#                        the installed tree and no source tree to lean on:
#                        --version, the templates found from bin/herd
#                        (render --list, init, validate), a local job whose
#                        ranks see the installed agent, and a PMIx job of
#                        build/examples/allreduce (the agent loads libpmix
#                        with the installed binary's search path)

# Run from `make integration` (make check), the tests would hand the
# outer make's flags and variables (its jobserver, SANITIZE=...) to the
# builds they start: those builds are plain, as a user's are.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES SANITIZE

copy_tree() {
	mkdir -p "$1" &&
	(cd "$HERD_ROOT" &&
		git ls-files --cached --others --exclude-standard |
		while IFS= read -r _ct_f; do
			[ -f "$_ct_f" ] && printf "%s\n" "$_ct_f"
		done | tar cf - -T -) | tar xf - -C "$1"
}

installed_checks() {
	_ic_bin=$1$2/bin
	_ic_share=$1$2/share
	version=$(sed -n 's/^#define HERD_VERSION "\(.*\)"/\1/p' \
		"$HERD_ROOT/include/herd/version.h") &&
	echo "herd $version" >expect.version &&
	"$_ic_bin/herd" --version >got.version &&
	test_cmp expect.version got.version &&
	"$_ic_bin/herd-agent" --version >/dev/null &&
	"$_ic_bin/herd" render --list >list &&
	grep -F "herd's templates in $_ic_share/herd/templates:" list &&
	grep "^  sbatch " list &&
	printf "some text to train on\n" >corpus.txt &&
	rm -rf proj &&
	"$_ic_bin/herd" init pretrain proj --set corpus="$PWD/corpus.txt" \
		--set hosts=localhost >init.out 2>&1 &&
	test -f proj/job.yaml && test -f proj/train.py &&
	"$_ic_bin/herd" validate proj/job.yaml >out &&
	echo "proj/job.yaml: ok" >expect &&
	test_cmp expect out &&
	cat >local.yaml <<-EOF &&
	name: installed-local
	nodes: {hosts: localhost, slots: 2}
	restart: {max: 0}
	launch:
	  command: echo rank \$RANK agent \$HERD_AGENT
	EOF
	XDG_STATE_HOME=$PWD/state "$_ic_bin/herd" run local.yaml >out 2>err &&
	printf "[0] rank 0 agent %s\n[1] rank 1 agent %s\n" \
		"$_ic_bin/herd-agent" "$_ic_bin/herd-agent" >expect &&
	sort out >got &&
	test_cmp expect got &&
	cp "$HERD_ROOT/build/examples/allreduce" ./allreduce &&
	cat >pmix.yaml <<-EOF &&
	name: installed-pmix
	nodes: {hosts: localhost, slots: 2}
	restart: {max: 0}
	launch:
	  mode: pmix
	  command: "'$PWD/allreduce'"
	EOF
	XDG_STATE_HOME=$PWD/state "$_ic_bin/herd" run pmix.yaml >out 2>err &&
	grep -c "allreduce 3 (ok), ring got [01] (ok)" out >n &&
	echo 2 >expect &&
	test_cmp expect n
}
