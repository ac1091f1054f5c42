// Package bench measures the effector runtime against a hand-written
// baseline on raw nats.go JetStream doing the same per-record work (take a
// record, publish one output, compare-and-set the state in KV, acknowledge).
// It has no code of its own besides the benchmarks; run them with `make
// bench`. BENCHMARKS.md at the repository root holds the figures.
package bench
