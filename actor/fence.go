package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Fencing: when a partition's lease moves, the server itself stops serving
// the former reader, whatever that reader does (it crashed, froze, was cut
// off, or came back without having seen its lease taken).
//
// The danger is a reader that cannot act: a frozen process (SIGSTOP, a GC
// pause, a stopped VM) or one behind a network cut the server has not
// noticed keeps its pull requests waiting on the server, and a lease in a KV
// bucket does not stop the server from serving them. Measured with 3
// ea-node processes and one frozen past the TTL, before this fence: the new
// owner reset the consumer, the server served the frozen node's waiting pull
// (10s expiry, 256 messages) first, the new owner saw a consumer sequence
// gap, reset again, and so on until the stale pull filled or expired:
// processing of the taken-over partitions came back 5–6.5s after the stop
// with a 2s TTL, and most counters not before the frozen node resumed.
//
// Two server-side mechanisms together fence the old reader:
//
//   - Every partition consumer (and every effector's own consumer, see
//     overflow.go) is a pinned-client priority group (nats-server 2.11+,
//     PriorityPolicy pinned_client, group [readerGroup]): the server serves
//     one client, the pinned one, and refuses the pull requests of any other
//     (a request carrying an old pin id is answered 423 and dropped; one
//     without an id waits, unserved, while a pin is set). A node taking the
//     partition unpins it before resetting it to the ack floor
//     ([Node.unpin]), so the old reader's requests, which carry its pin id,
//     are dropped, and the new reader's first request gets the pin. A node
//     that stops reading a partition because its lease moved unpins it too:
//     a request of its own the server pinned after the new owner's unpin
//     must not hold the partition until the pin's TTL. An unpin is cheap
//     for a healthy pinned reader: its next request is answered 423 and it
//     asks again, no message is lost or reordered.
//   - Pull requests expire inside the lease TTL ([pullExpiry]: the TTL
//     minus one beat, 1s to 10s; 2s with the defaults). A frozen node's
//     requests are gone from the server by the time the others can declare
//     it dead (TTL minus a beat after its last heartbeat at the earliest),
//     so none is left to take the pin after the takeover. (Half that
//     expiry cost twice the idle pull traffic, which slowed a loaded
//     machine's nodes: every partition consumer asks again at every
//     expiry and gets a heartbeat every half expiry.) That closes the one
//     gap of the pinned group: a request sent before its reader learnt its
//     pin id (an idle partition) carries no id, and the server would pin it.
//     A healthy reader asks again at every expiry, which also keeps its pin
//     alive: the pin's own TTL ([pinnedTTL], the lease TTL, at least two
//     expiries) only ever ends a pin whose holder stopped asking.
//
// Alternatives considered: a new consumer per lease epoch fences hardest
// (deleting the old consumer drops its requests), but it changes the
// consumer's name at every takeover (tools and dashboards find partition
// consumers by name), costs a create and a delete per takeover and loses
// the acknowledgements above the ack floor; short expiries alone bound a
// frozen reader but not a resumed one, which reads again, unfenced, until
// it sees its lease gone. See issue 18, finding 2.

// readerGroup is the priority group every reader of a partition (or of an
// effector's own consumer) pulls in.
const readerGroup = "reader"

// pullExpiry is how long a pull request waits on the server: well inside
// the lease TTL, so that a frozen reader's requests are gone before the
// others can take its partitions (see Fencing above). nats.go allows no less
// than 1s.
func pullExpiry(o Options) time.Duration {
	return min(max(o.HeartbeatTTL-o.Heartbeat, time.Second), 10*time.Second)
}

// pinnedTTL is how long the server keeps a reader pinned without hearing a
// pull request from it: the lease TTL, and at least two pull expiries, as a
// healthy reader asks again at every expiry.
func pinnedTTL(o Options) time.Duration {
	return max(o.HeartbeatTTL, 2*pullExpiry(o))
}

// fenced adds the pinned-client priority group to a consumer configuration.
func (n *Node) fenced(cfg jetstream.ConsumerConfig) jetstream.ConsumerConfig {
	cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
	cfg.PriorityGroups = []string{readerGroup}
	cfg.PinnedTTL = pinnedTTL(n.opts)
	return cfg
}

// isFenced reports whether the consumer described by info pulls in
// [readerGroup] (an own consumer made before fencing does not).
func isFenced(info *jetstream.ConsumerInfo) bool {
	return info != nil && info.Config.PriorityPolicy == jetstream.PriorityPolicyPinned &&
		slices.Contains(info.Config.PriorityGroups, readerGroup)
}

// pullOpts are the options of a reader's Consume on a consumer described by
// info: a window of batch records, short pull requests, and the reader
// group when the consumer has it.
func (n *Node) pullOpts(info *jetstream.ConsumerInfo, batch int, onErr jetstream.ConsumeErrHandler) []jetstream.PullConsumeOpt {
	exp := pullExpiry(n.opts)
	opts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(batch),
		jetstream.PullExpiry(exp), jetstream.PullHeartbeat(exp / 2),
		jetstream.ConsumeErrHandler(onErr),
	}
	if isFenced(info) {
		opts = append(opts, jetstream.PullPriorityGroup(readerGroup))
	}
	return opts
}

// errCodeNoSuchGroup is JetStream's error for a priority group the consumer
// does not have (JSConsumerInvalidPriorityGroupErr); nats.go names no
// constant for it.
const errCodeNoSuchGroup jetstream.ErrorCode = 10160

// unpin ends the pin of consumer's reader group, so the server serves no
// request of the former reader from now on and pins the next request
// without a pin id. A consumer without the group (made before fencing) has
// nothing to unpin.
func (n *Node) unpin(ctx context.Context, consumer string) error {
	err := n.stream.UnpinConsumer(ctx, consumer, readerGroup)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeNoSuchGroup {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpin consumer %s: %w", consumer, err)
	}
	return nil
}
