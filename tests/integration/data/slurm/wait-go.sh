#!/bin/sh
# wait-go.sh GO: a rank that says it is ready (ready.RANK next to GO),
# then waits for the file GO (bounded: 30 s) and says it is done.
dir=$(dirname "$1")
: >"$dir/ready.$RANK"
i=0
while [ ! -e "$1" ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "rank $RANK: no $1 after 30 s" >&2; exit 1; }
	sleep 0.1   # poll interval of a bounded wait
done
echo "rank $RANK done"
