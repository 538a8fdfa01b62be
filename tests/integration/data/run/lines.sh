#!/bin/sh
# lines.sh N: run as a rank; prints N numbered lines to stdout, as fast as
# awk can, each long enough that many share one pipe read:
#   r=RANK i=I xxxx...
exec awk -v r="$RANK" -v n="$1" 'BEGIN {
	pad = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	for (i = 1; i <= n; i++)
		printf "r=%d i=%d %s\n", r, i, pad
}'
