# check-lines.awk -v n=N -v ranks=R: reads herd's output of lines.sh N on
# R ranks; prints one complaint per bad line (not exactly "[r] r=r i=I x+",
# a rank other than the prefix says, a number out of order) and per rank
# whose count is not N.  Prints nothing when the output is intact.
{
	if ($0 !~ /^\[[0-9]+\] r=[0-9]+ i=[0-9]+ x+$/) {
		print "malformed line " NR ": " substr($0, 1, 80)
		next
	}
	r = substr($1, 2, length($1) - 2)
	if ($2 != "r=" r) {
		print "line " NR " tagged [" r "] holds " $2
		next
	}
	i = substr($3, 3) + 0
	if (i != seen[r] + 1)
		print "rank " r ": line " i " after line " seen[r]
	seen[r] = i
}
END {
	for (k = 0; k < ranks; k++)
		if (seen[k] != n)
			print "rank " k ": " seen[k] + 0 " lines, not " n
}
