#!/bin/sh
# hold.sh DIR: a rank that says where it runs (DIR/started holds the
# node's name) and then waits, at most 30 s, until the test makes DIR/go.
hostname >"$1/started.tmp" && mv "$1/started.tmp" "$1/started" || exit 8
i=0
while [ ! -e "$1/go" ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || exit 9
	sleep 0.05   # poll interval of a bounded wait
done
echo released
