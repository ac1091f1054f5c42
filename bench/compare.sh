#!/usr/bin/env bash
# Runs the benchmarks of this package in alternating rounds (raw baseline,
# then the runtime, for each size) so that drift of a noisy machine hits both
# alike, and prints the median of each with the ratio runtime/baseline.
#
#   bench/compare.sh [rounds]      (default 5; make bench runs it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rounds=${1:-5}
records=${RECORDS:-30000}
latency=${LATENCY:-3000}
bin=$(mktemp -d)/bench.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
out=$(mktemp)
# one runs one benchmark in a fresh process and keeps its result line; a
# failed run is reported and skipped, not fatal.
one() {
	local res
	if res=$("$bin" -test.run '^$' -test.bench "$1" -test.benchtime "$2" 2>&1) && grep -q '^Benchmark' <<<"$res"; then
		grep '^Benchmark' <<<"$res" | tee -a "$out"
	else
		echo "FAILED: $1" >&2
		tail -20 <<<"$res" >&2
	fi
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(go version | cut -d' ' -f3), $rounds rounds, $records records per throughput run, $latency per latency run" | tee "$out"
for ((r = 1; r <= rounds; r++)); do
	for impl in ceiling ceiling-bare; do
		one "^BenchmarkThroughput\$/^$impl\$" "${records}x"
	done
	for n in 1 100; do
		for impl in rawmin raw actor actor1; do
			one "^BenchmarkThroughput\$/^$impl\$/^effectors=$n\$" "${records}x"
		done
	done
	for impl in rawmin raw actor; do
		one "^BenchmarkLatency\$/^$impl\$" "${latency}x"
	done
	for impl in alone beside-slow beside-slow-no-overflow; do
		one "^BenchmarkNeighbours\$/^$impl\$" "5000x"
	done
done
echo
echo "medians over $rounds rounds:"
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^BenchmarkThroughput\/ceiling/ {
	split($1, p, "/"); key = p[2]; sub(/-[0-9]+$/, "", key)
	for (i = 2; i <= NF; i++) {
		if ($(i + 1) == "records/s") ceil[key] = ceil[key] " " $i
		if ($(i + 1) == "publish-msg/s") cpub[key] = cpub[key] " " $i
		if ($(i + 1) == "consume-msg/s") ccon[key] = ccon[key] " " $i
	}
	next
}
/^BenchmarkThroughput/ {
	split($1, p, "/"); key = p[2] "/" p[3]; sub(/-[0-9]+$/, "", key)
	for (i = 2; i <= NF; i++) {
		if ($(i + 1) == "records/s") tput[key] = tput[key] " " $i
		if ($(i + 1) == "cpu-µs/record") cpu[key] = cpu[key] " " $i
	}
}
/^BenchmarkNeighbours/ {
	split($1, p, "/"); key = p[2]; sub(/-[0-9]+$/, "", key)
	for (i = 2; i <= NF; i++) if ($(i + 1) == "records/s") hol[key] = hol[key] " " $i
}
/^BenchmarkLatency/ {
	split($1, p, "/"); key = p[2]; sub(/-[0-9]+$/, "", key)
	for (i = 2; i <= NF; i++) {
		if ($(i + 1) == "p50-µs") p50[key] = p50[key] " " $i
		if ($(i + 1) == "p99-µs") p99[key] = p99[key] " " $i
	}
}
END {
	for (n = 1; n <= 100; n += 99) {
		r = median(tput["raw/effectors=" n]); a = median(tput["actor/effectors=" n]); m = median(tput["rawmin/effectors=" n])
		printf "throughput, %3d effectors: raw %7.0f rec/s  actor %7.0f rec/s  actor/raw %.2f   (rawmin %7.0f, actor/rawmin %.2f)\n", n, r, a, a / r, m, a / m
		rc = median(cpu["raw/effectors=" n]); ac = median(cpu["actor/effectors=" n]); mc = median(cpu["rawmin/effectors=" n])
		printf "cpu per record, %3d effectors (server and client): raw %.1f µs  actor %.1f µs  actor/raw %.2f   (rawmin %.1f µs)\n", n, rc, ac, ac / rc, mc
		o = median(tput["actor1/effectors=" n])
		printf "batching, %3d effectors with a backlog: actor %7.0f rec/s  one record per state write %7.0f rec/s  ratio %.2f\n", n, a, o, a / o
	}
	cw = median(ceil["ceiling"]); cb = median(ceil["ceiling-bare"])
	printf "ceiling of a hop (two writes, one read): workload records %.0f rec/s (publish %.0f, consume %.0f msg/s); bare 128-byte messages %.0f rec/s (publish %.0f, consume %.0f msg/s)\n", cw, median(cpub["ceiling"]), median(ccon["ceiling"]), cb, median(cpub["ceiling-bare"]), median(ccon["ceiling-bare"])
	for (n = 1; n <= 100; n += 99) {
		a = median(tput["actor/effectors=" n])
		printf "actor at the ceiling, %3d effectors: %.2f of the workload records ceiling, %.2f of the bare one\n", n, a / cw, a / cb
	}
	al = median(hol["alone"]); bs = median(hol["beside-slow"]); bn = median(hol["beside-slow-no-overflow"])
	printf "50 neighbours of a slow effector with 5,000 waiting: alone %.0f rec/s  beside it %.0f rec/s  ratio %.2f  (without overflow %.0f rec/s, ratio %.2f)\n", al, bs, bs / al, bn, bn / al
	printf "latency p50: raw %s µs  actor %s µs  (rawmin %s)\n", median(p50["raw"]), median(p50["actor"]), median(p50["rawmin"])
	printf "latency p99: raw %s µs  actor %s µs  actor/raw %.2f  (rawmin %s, actor/rawmin %.2f)\n", median(p99["raw"]), median(p99["actor"]), median(p99["actor"]) / median(p99["raw"]), median(p99["rawmin"]), median(p99["actor"]) / median(p99["rawmin"])
}' "$out"
rm -f "$out"
