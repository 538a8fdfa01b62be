#!/bin/sh
# rank-wait.sh OUTDIR: run as a rank; writes "PID PGID HOST PPID" to
# OUTDIR/pid.$RANK (whole, by rename), prints "ready" and waits until a
# signal: on SIGINT or SIGTERM it prints "rank R got SIGINT|SIGTERM" and
# exits 130 or 143.
out=$1
trap 'echo "rank $RANK got SIGINT"; exit 130' INT
trap 'echo "rank $RANK got SIGTERM"; exit 143' TERM
pgid=$(ps -o pgid= -p $$ | tr -d ' ')
echo "$$ $pgid $(hostname) $PPID" >"$out/pid.$RANK.tmp" &&
mv "$out/pid.$RANK.tmp" "$out/pid.$RANK" || exit 1
echo ready
# A background sleep and wait: wait returns at once when a signal comes.
while :; do
	sleep 60 &
	wait $!
done
