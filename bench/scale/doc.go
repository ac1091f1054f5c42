// Package scale measures the effector runtime at scale, with the NATS server,
// the node under test and the load driver in separate processes so that the
// memory of each can be read on its own: 10,000 active effectors on one node,
// 1,000,000 mostly passive effectors, throughput across 10,000 active
// effectors against 100, the activation latency of a passive effector, and
// the failover time of a killed node.
//
// # Running
//
// The scenarios run from the command in ./cmd/scale (see run.sh, which builds
// it and runs active, million and failover):
//
//	bench/scale/run.sh                     # every scenario, full size
//	go run ./bench/scale/cmd/scale active -n 10000
//	go run ./bench/scale/cmd/scale raw -sizes 100,10000   # the NATS server alone
//
// The same binary is the NATS server (scale server) and the node (scale node)
// the scenarios start as child processes; see [Child]. The node is
// configured like ea-node (the record store's indexer in the same process,
// memory returned once quiet after a burst); -node-arg passes it other
// flags, e.g. -node-arg record-store=false. Each throughput run reports the
// CPU time per record of every process, counted until the record store has
// indexed the run's records when it runs. Figures and what
// dominates them: notes/scale-BENCHMARKS.md.
//
// # Pieces
//
// [Active], [Million], [Failover] and [Raw] are the scenarios; [Proc] is a
// child process whose resident memory ([Proc.RSS]) can be sampled;
// [CreateDocs] writes state documents straight into the state bucket;
// [Publish] fills mailboxes; [Outputs] counts the outputs effectors emit.
//
// # Tests
//
// The package's tests run every scenario at a small size in a few seconds,
// with the test binary itself as the child processes; full sizes run only
// from the command.
package scale
