#!/bin/sh
# Installs every Debian package herd, its tests and its demo need, when
# missing.  Idempotent and quiet when everything is present; fails loudly
# when a package cannot be had.  Needs root (or sudo) only to install.
set -eu

PACKAGES="
make gcc pkg-config clang libclang-rt-14-dev
libyaml-dev libssh-dev libcurl4-openssl-dev libjansson-dev libhwloc-dev
libpmix-dev libcmocka-dev libslurm-dev libssl-dev
hwloc-nox perl sharness iproute2 util-linux procps psmisc jq passwd gdb
openssh-client openssh-server
slurm-wlm slurmctld slurmd slurm-client munge
openmpi-bin libopenmpi-dev pdsh
python3 python3-torch python3-sentencepiece
libmicrohttpd-dev prometheus chromium fonts-dejavu-core curl
mandoc lintian debhelper dpkg-dev
"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "deps: missing packages:$missing; run 'make deps' as root" >&2
		exit 1
	fi
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
# Services must not start from postinst scripts: the tests start their own.
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	made_policy=1
fi
status=0
$SUDO apt-get update -qq || status=$?
if [ "$status" -eq 0 ]; then
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing || status=$?
fi
[ -n "$made_policy" ] && $SUDO rm -f "$policy"
if [ "$status" -ne 0 ]; then
	echo "deps: FAILED to install:$missing (apt-get exit $status)" >&2
	exit 1
fi
# Verify: a package that apt could not deliver is an error, not a skip.
for p in $missing; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		echo "deps: package $p is still not installed" >&2
		exit 1
	fi
done
