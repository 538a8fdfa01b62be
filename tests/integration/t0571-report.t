#!/bin/sh

test_description='herd report writes one self-contained HTML file (no script, no network) with SVG plots drawn by herd: checked as a file (well-formed SVG, escaped strings, bounded size and points for long runs and many nodes) and rendered in headless Chromium, where the plot lines must show up as pixels of their colours'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd python3 chromium jq

VIEWS=$HERD_TEST_DIR/data/views

# file_url FILE: file:// URL of ./FILE (the trash directory has a blank).
file_url() {
	printf "file://%s/%s" "$(pwd | sed "s/ /%20/g")" "$1"
}

# shot HTML PNG HEIGHT: renders file HTML to PNG (1200 wide), a private
# profile, bounded by a timeout.  (The page has no script: report-check.py
# proves it; --blink-settings=scriptEnabled=false would also stop
# headless Chromium from writing the screenshot.)
shot() {
	timeout 90 chromium --headless --no-sandbox --disable-gpu \
		--user-data-dir="$PWD/chromium-profile" \
		--hide-scrollbars --window-size=1200,$3 \
		--screenshot="$PWD/$2" "$(file_url "$1")" >chromium.log 2>&1 &&
	test -s "$2"
}

# colour N FILE COLOUR: the count of pixels of COLOUR in png-colours output.
count_of() {
	awk -v c="$2" '$1 == c { print $2 }' "$1"
}

test_expect_success 'a report of an ended run: one file, every chart well-formed, strings escaped' '
	umask 022 &&
	herd report "$VIEWS/ended" -o ended.html &&
	test "$(stat -c %a ended.html)" = 644 &&
	python3 "$VIEWS/report-check.py" ended.html 500000 >check &&
	cat check &&
	grep "^charts 16 polylines " check &&
	grep "<h1>herd report: job train</h1>" ended.html &&
	grep "<title>herd report: train 20251201-004640.000-ab12</title>" ended.html &&
	grep "lost &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;gone&#39;" ended.html &&
	! grep "<script" ended.html &&
	test $(grep -c "<div class=\"node" ended.html) = 5 &&
	grep "<div class=\"node slow\"><h3>node2 <small>up, slowest</small></h3>" ended.html &&
	grep "<th>resumed from</th><td>/ckpt/step-100 (attempt 2)</td>" ended.html &&
	grep "<td>2:00</td><td>1</td><td>node_failed</td><td>node3</td>" ended.html &&
	grep "<td>2:01</td><td>2</td><td>spare_used</td><td>node5</td>" ended.html &&
	grep "<td>2:02</td><td>2</td><td>checkpoint_found</td><td></td><td>/ckpt/step-100</td>" ended.html &&
	grep "<th>lines skipped</th><td>0 in events.jsonl, 2 in metrics.jsonl</td>" ended.html
'

test_expect_success 'a running job and an events-only run give a report too; -o - writes stdout' '
	herd report "$VIEWS/running" -o running.html &&
	python3 "$VIEWS/report-check.py" running.html 200000 &&
	grep "<th>state</th><td>running (snapshot), 1 attempt</td>" running.html &&
	herd report "$VIEWS/eventsonly" -o - >eventsonly.html &&
	python3 "$VIEWS/report-check.py" eventsonly.html 100000 &&
	grep "No metrics.jsonl in this run directory" eventsonly.html &&
	grep "<text x=\"[0-9.]*\" y=\"16\" font-size=\"13\" font-weight=\"bold\">timeline</text>" eventsonly.html &&
	! grep "<polyline" eventsonly.html
'

test_expect_success 'report errors: no -o, an unwritable place, a missing run; nothing half-written' '
	test_expect_code 2 herd report "$VIEWS/ended" 2>err &&
	grep -x "herd: report: say where to write it: -o report.html" err &&
	test_expect_code 1 herd report "$VIEWS/ended" -o nodir/r.html 2>err &&
	test $(wc -l <err) = 1 &&
	grep -x "herd: report: cannot write nodir/r.html: No such file or directory" err &&
	test_expect_code 2 herd report nowhere -o r.html 2>err &&
	grep -x "herd: report: no job nowhere here (herd list shows yours)" err &&
	test ! -e r.html &&
	test -z "$(ls | grep "\.html\.")"
'

test_expect_success 'a long run with many nodes stays bounded (points per line, nodes drawn, bytes)' '
	mkdir long &&
	python3 - long <<-\EOF &&
	import json, math, sys
	d = sys.argv[1]
	T0 = 1764550000000
	with open(d + "/events.jsonl", "w") as f:
	    f.write(json.dumps({"t": T0, "event": "job_start", "job": "long", "run": "r", "nodes": 100, "spares": 0}) + "\n")
	    f.write(json.dumps({"t": T0 + 10, "event": "attempt_start", "attempt": 1, "nodes": 100}) + "\n")
	with open(d + "/metrics.jsonl", "w") as f:
	    for s in range(1, 30001):
	        line = {"t": T0 + s * 1000, "attempt": 1,
	                "job": {"step": s, "loss": 3 / (1 + s / 5000.0), "tokens_per_s": 65536 + 1000 * math.sin(s / 50.0),
	                        "slowest": "n77"}}
	        if s % 60 == 0 or s == 30000:
	            line["nodes"] = [{"node": "n%d" % i, "state": "up", "rx_bytes_per_s": 1e8 + i, "tx_bytes_per_s": 1e8,
	                              "steps_per_s": 1.0, "gpus": [{"gpu": 0, "util_pct": 90}]} for i in range(100)]
	        f.write(json.dumps(line) + "\n")
	EOF
	herd report long -o long.html &&
	python3 "$VIEWS/report-check.py" long.html 3000000 >check &&
	cat check &&
	grep "<p class=\"note\">64 of 100 nodes shown.</p>" long.html &&
	grep "<div class=\"node slow\"><h3>n77 " long.html &&
	herd status long >out &&
	grep "^metrics at +8:20:00: step 30000," out
'

test_expect_success 'Chromium draws the charts: the line colours are on the page' '
	shot ended.html ended.png 2400 &&
	python3 "$VIEWS/png-colours.py" ended.png "#1f77b4" "#2ca02c" "#d62728" "#9467bd" "#ff7f0e" "#c44e52" "#55a868" >colours &&
	cat colours &&
	for c in "#1f77b4" "#2ca02c" "#d62728" "#9467bd" "#ff7f0e"
	do
		n=$(count_of colours "$c") &&
		test "$n" -ge 200 || { echo "only $n pixels of $c"; false; }
	done &&
	test "$(count_of colours "#c44e52")" -ge 100 &&
	test "$(count_of colours "#55a868")" -ge 100 &&
	shot eventsonly.html eventsonly.png 800 &&
	python3 "$VIEWS/png-colours.py" eventsonly.png "#1f77b4" "#2ca02c" "#c44e52" >colours &&
	cat colours &&
	test "$(count_of colours "#1f77b4")" = 0 &&
	test "$(count_of colours "#2ca02c")" = 0 &&
	test "$(count_of colours "#c44e52")" -ge 100
'

test_expect_success 'Chromium parsed every chart of the file into the page' '
	timeout 90 chromium --headless --no-sandbox --disable-gpu \
		--user-data-dir="$PWD/chromium-profile" \
		--dump-dom "$(file_url ended.html)" >dom 2>chromium.log &&
	test $(grep -o "<svg " dom | wc -l) = 16 &&
	test $(grep -o "<polyline " dom | wc -l) = $(grep -o "<polyline " ended.html | wc -l)
'

test_expect_success 'issue 22: loss against step with attempts and failures marked, moving averages, each attempt and the hosts in the summary; --time plots loss against time' '
	grep "font-weight=\"bold\">loss by step</text>" ended.html &&
	grep "text-anchor=\"end\" fill=\"#444\">step</text>" ended.html &&
	grep "<line class=\"vline\" [^>]*stroke=\"#4c72b0\"[^>]*><title>attempt 2 starts, resumed from /ckpt/step-100</title>" ended.html &&
	grep "<line class=\"vline\" [^>]*stroke=\"#c44e52\"[^>]*><title>failed: node3: lost &lt;script&gt;" ended.html &&
	grep "fill=\"#333\">mean of 5</text>" ended.html &&
	grep "<th>attempt 1</th><td>world size 8 on 4 nodes, ran 2:00, node node3 failed</td>" ended.html &&
	grep "<th>attempt 2</th><td>world size 8 on 4 nodes, ran 2:58, completed, resumed from /ckpt/step-100</td>" ended.html &&
	grep "<th>hosts</th><td>node1, node2, node3, node4, node5</td>" ended.html &&
	herd report --time "$VIEWS/ended" -o time.html &&
	python3 "$VIEWS/report-check.py" time.html 500000 &&
	! grep "loss by step" time.html &&
	grep "font-weight=\"bold\">loss</text>" time.html &&
	herd report --help >help &&
	grep -- "--time" help
'

test_expect_success 'issue 22: a run stopped by the user, nodes without GPUs, an evicted node: grey not red, CPU and RSS once per node, no NVML said once, the evicted node'"'"'s lines end at its eviction, the last step is rank 0'"'"'s' '
	mkdir stopped &&
	python3 - stopped <<-\EOF &&
	import json, sys
	d = sys.argv[1]
	T0 = 1764550000000
	ev = [{"t": T0, "event": "job_start", "job": "stop", "run": "r2", "nodes": 2, "spares": 0, "mode": "plain", "transport": "ssh"},
	      {"t": T0 + 10, "event": "node_up", "host": "alpha"},
	      {"t": T0 + 20, "event": "node_up", "host": "beta"},
	      {"t": T0 + 30, "event": "attempt_start", "attempt": 1, "nodes": 2, "world_size": 2},
	      {"t": T0 + 20000, "event": "node_evicted", "host": "beta", "reason": "straggler", "attempt": 1},
	      {"t": T0 + 40030, "event": "attempt_end", "attempt": 1, "reason": "interrupted (Terminated)", "status": 143},
	      {"t": T0 + 40100, "event": "job_end", "status": 143, "attempts": 1}]
	with open(d + "/events.jsonl", "w") as f:
	    for e in ev:
	        f.write(json.dumps(e) + "\n")
	with open(d + "/metrics.jsonl", "w") as f:
	    for s in range(1, 41):
	        nodes = []
	        for n in ("alpha", "beta"):
	            # an older herd wrote an evicted node with its last values
	            nodes.append({"node": n, "state": "failed" if n == "beta" and s > 20 else "up",
	                          "cpu_pct": 100.0 + s, "rss_kib": 200000 + s, "rx_bytes_per_s": 1e6,
	                          "tx_bytes_per_s": 1e6, "steps_per_s": 1.0, "step": s,
	                          "gpu_error": "no NVML (libnvidia-ml.so.1: cannot open shared object file)"})
	        f.write(json.dumps({"t": T0 + s * 1000, "attempt": 1, "elapsed_ms": s * 1000,
	                            "job": {"step": s, "loss_step": s + 1, "loss": 2.0 / s, "tokens_per_s": 1000.0},
	                            "nodes": nodes}) + "\n")
	EOF
	herd report stopped -o stopped.html &&
	python3 "$VIEWS/report-check.py" stopped.html 200000 &&
	grep "<th>attempt 1</th><td>world size 2 on 2 nodes, ran 0:40, interrupted (Terminated) (stopped by the user)</td>" stopped.html &&
	grep "<th>last step</th><td>41</td>" stopped.html &&
	test "$(grep -o "no NVML" stopped.html | wc -l)" = 1 &&
	grep "<p class=\"note\">2 nodes without GPU values (no NVML (libnvidia-ml.so.1: cannot open shared object file)): CPU % and RSS of the ranks instead.</p>" stopped.html &&
	test "$(grep -o ">CPU % (100 = a core)</text>" stopped.html | wc -l)" = 2 &&
	test "$(grep -o ">RSS (bytes)</text>" stopped.html | wc -l)" = 2 &&
	! grep ">GPU util</text>" stopped.html &&
	# the CPU line of beta (evicted at 0:20) ends at about half of alpha'"'"'s
	python3 - stopped.html <<-\EOF &&
	import re, sys
	html = open(sys.argv[1]).read()
	def last_x(node):
	    div = re.search(r"<div class=\"node[^\"]*\"><h3>%s .*?</div>" % node, html, re.S).group(0)
	    pts = re.search(r"<polyline [^>]*points=\"([^\"]*)\"", div).group(1).split()
	    return float(pts[0].split(",")[0]), float(pts[-1].split(",")[0])
	a0, a1 = last_x("alpha")
	b0, b1 = last_x("beta")
	print("alpha", a0, a1, "beta", b0, b1)
	assert abs(a0 - b0) < 1 and b1 - b0 < 0.6 * (a1 - a0), "beta does not end at its eviction"
	EOF
	shot stopped.html stopped.png 2600 &&
	python3 "$VIEWS/png-colours.py" stopped.png "#999999" "#c44e52" "#e377c2" "#1f77b4" >colours &&
	cat colours &&
	test "$(count_of colours "#999999")" -ge 5000 &&
	test "$(count_of colours "#c44e52")" = 0 &&
	test "$(count_of colours "#e377c2")" -ge 100 &&
	test "$(count_of colours "#1f77b4")" -ge 100
'

test_expect_success 'issue 22: herd report JOB across the runs of a job: a real run stopped by herd stop, then herd run --resume; the job file'"'"'s command and settings; --one-run' '
	cat >rr.yaml <<-EOF &&
	name: rr
	nodes: {hosts: "sim1", slots: 1, transport: local}
	health: {heartbeat: 1s, timeout: 30s, grace: 1s}
	restart: {max: 0}
	log: {dir: "$PWD/runs/rr"}
	metrics: {interval: 200ms}
	checkpoint: {dir: ckpt, pattern: "step_*", complete_marker: DONE}
	launch:
	  workdir: $PWD
	  env: {SECRET_TOKEN: "do-not-show-me"}
	  command: |
	    start=\$(cat rr.state 2>/dev/null || echo 0)
	    for s in 1 2 3; do
	      step=\$((start + s))
	      echo "{\"step\": \$step, \"loss\": 1.\$step, \"tokens\": 100}" >>"\$HERD_METRICS"
	      echo \$step >rr.state
	      mkdir -p ckpt/step_\$step
	      [ \$step = 6 ] || touch ckpt/step_\$step/DONE
	      sleep 0.3
	    done
	    # the first run waits here until the test stops it
	    while [ ! -e rr.go ]; do sleep 0.1; done
	EOF
	{ herd run rr.yaml >rr1.out 2>rr1.err & } &&
	pid=$! &&
	i=0 &&
	until test -e runs/rr/latest/metrics.jsonl &&
		jq -e -s "any(.[]; .job.step == 3)" runs/rr/latest/metrics.jsonl >/dev/null 2>&1; do
		i=$((i + 1)) && test $i -lt 600 || { cat rr1.err; false; }
		sleep 0.05   # poll interval of a bounded wait
	done &&
	first=$(readlink runs/rr/latest) &&
	herd stop "runs/rr/$first" &&
	wait_exit $pid 30 &&
	test "$WAIT_RC" != 0 &&
	touch rr.go &&
	# a stopped run has ended: --resume starts it again with --force (issue 23)
	herd run --resume "runs/rr/$first" --force >rr2.out 2>rr2.err &&
	second=$(readlink runs/rr/latest) &&
	test "$first" != "$second" &&
	herd report rr.yaml -o rr.html &&
	python3 "$VIEWS/report-check.py" rr.html 300000 &&
	grep "<th>runs (resumed with --resume)</th><td>$first, $second</td>" rr.html &&
	grep "<th>attempt 1</th><td>world size 1 on 1 node, ran [0-9:]*, interrupted ([A-Za-z]*) (stopped by the user)</td>" rr.html &&
	grep "<th>attempt 2</th><td>world size 1 on 1 node, ran [0-9:]*, completed, resumed from $PWD/ckpt/step_3</td>" rr.html &&
	grep "<th>checkpoints written</th><td>6: step_1, step_2, step_3, step_4, step_5, step_6</td>" rr.html &&
	grep "<th>newest complete checkpoint</th><td>$PWD/ckpt/step_5</td>" rr.html &&
	grep "<th>last step</th><td>6</td>" rr.html &&
	grep "<title>attempt 2 starts, resumed from $PWD/ckpt/step_3</title>" rr.html &&
	grep "<th>command</th><td><pre class=\"cmd\">start=\$(cat rr.state 2&gt;/dev/null || echo 0)$" rr.html &&
	grep "^while \[ ! -e rr.go \]; do sleep 0.1; done</pre></td></tr>$" rr.html &&
	grep "<th>launch.env (names)</th><td>SECRET_TOKEN</td>" rr.html &&
	! grep "do-not-show-me" rr.html &&
	herd report --one-run rr.yaml -o one.html &&
	! grep "runs (resumed" one.html &&
	! grep "<th>attempt 2</th>" one.html &&
	grep "<th>last step</th><td>6</td>" one.html
'

test_done
