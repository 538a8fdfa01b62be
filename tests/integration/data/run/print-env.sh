#!/bin/sh
# print-env.sh OUTDIR [NAME...]: run as a rank; writes the variables herd
# sets (and the extra NAMEs) to OUTDIR/env.$RANK as NAME=value lines,
# NAME!unset for a missing one, then pwd=DIR and host=HOSTNAME.  The file
# appears whole (rename) so a test can poll for it.
out=$1
shift
f=$out/env.$RANK
for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK \
	MASTER_ADDR MASTER_PORT TORCHELASTIC_RESTART_COUNT HERD_JOB \
	HERD_ATTEMPT HERD_RESUME_FROM HERD_PROGRESS_FILE GLOO_SOCKET_IFNAME \
	NCCL_SOCKET_IFNAME "$@"; do
	if eval "[ \"\${$v+set}\" = set ]"; then
		eval "printf '%s=%s\n' $v \"\$$v\""
	else
		printf '%s!unset\n' "$v"
	fi
done >"$f.tmp" &&
echo "pwd=$(pwd)" >>"$f.tmp" &&
echo "host=$(hostname)" >>"$f.tmp" &&
mv "$f.tmp" "$f"
