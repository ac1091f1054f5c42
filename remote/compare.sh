#!/usr/bin/env bash
# Runs BenchmarkHop's cases in alternating rounds, each in a fresh process,
# so that the drift of a noisy machine hits all alike, and prints the median
# of each with its ratio to the Go kind in-process.
#
#   remote/compare.sh [rounds] [records]     (default 5 rounds, 1000 records)
#
# Needs node with clients/workers/js's npm modules and python3 for the
# worker cases (they fail otherwise).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
rounds=${1:-5}
records=${2:-1000}
bin=$(mktemp -d)/remote.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .
out=$(mktemp)
impls="go-kind go-worker-json go-worker-msgpack js-worker-json js-worker-msgpack python-worker-json"
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3), $rounds rounds, $records records per run"
for ((r = 1; r <= rounds; r++)); do
	for impl in $impls; do
		"$bin" -test.run '^$' -test.bench "^BenchmarkHop\$/^$impl\$/" -test.benchtime "${records}x" 2>/dev/null | grep '^BenchmarkHop' >>"$out" || echo "FAILED: $impl" >&2
	done
done
# median ns/op of each case, and its ratio to go-kind's (POSIX awk: the
# values come sorted)
awk '{name=$1; sub(/-[0-9]+$/, "", name); print name, $3}' "$out" | sort -k1,1 -k2,2n | awk '
{ n = $1; c[n]++; v[n, c[n]] = $2 }
END {
	for (n in c) {
		k = c[n]; med[n] = (k % 2) ? v[n, (k+1)/2] : (v[n, k/2] + v[n, k/2+1]) / 2
	}
	for (n in med) {
		test = n; sub(/^.*\//, "", test)
		ref = "BenchmarkHop/go-kind/" test
		printf "%-45s %2d runs  median %10.0f ns/op  %6.2fx go-kind\n", n, c[n], med[n], med[n] / med[ref]
	}
}' | sort
rm -f "$out"
