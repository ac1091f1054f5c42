#!/usr/bin/env bash
# Runs the scale scenarios of this package (see doc.go) one after the other,
# each with a fresh NATS server process, and prints their reports; the
# children's logs go to scale.log in the current directory.
#
#   bench/scale/run.sh                 every scenario at full size
#   bench/scale/run.sh active          one scenario (active, million, failover)
#   SCALE_ARGS='-n 2000' bench/scale/run.sh active     flags for the scenario
#
# Full size: active = 10,000 effectors (throughput against 100, 100,000
# records per run, 1,000 activation-latency samples), million = 1,000,000
# state documents (1,000 latency samples, 10,000 activated at once),
# failover = 3 nodes, 3,000 effectors, default heartbeat 1s and TTL 3s.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(mktemp -d)/scale
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$here" && go build -o "$bin" ./cmd/scale)
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(active million failover)
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(go version | cut -d' ' -f3)"
for s in "${scenarios[@]}"; do
	# shellcheck disable=SC2086 # SCALE_ARGS is a list of flags
	"$bin" "$s" ${SCALE_ARGS:-} 2>>scale.log
done
