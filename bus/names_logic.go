package bus

// Logic is the subject on which a node asks the worker processes of kind
// for the logic of one record (request-reply; see package remote and
// docs/polyglot.md): <prefix>.logic.<kind>. Records may never be sent
// there: [Routes] refuses every subject under the prefix that is not a
// mailbox or the sender's own outbox.
func (n Names) Logic(kind string) string { return n.prefix + ".logic." + kind }

// LogicQueue is the queue group the workers of kind share, so that each
// request goes to one of them: <prefix>.logic.<kind>, the subject itself.
// Any name works as long as every worker of the kind uses the same one;
// this is the one the reference workers use.
func (n Names) LogicQueue(kind string) string { return n.Logic(kind) }

// LogicService is the NATS micro service name under which the workers of
// kind announce themselves (docs/polyglot.md, "Discovery"):
// <prefix>-logic-<kind>. A name of micro is [A-Za-z0-9_-]+, which prefix
// and kind are.
func (n Names) LogicService(kind string) string { return n.prefix + "-logic-" + kind }

// LogicPing is the subject on which every worker of kind that announces
// itself answers a ping (the micro protocol's $SRV.PING.<name>), so that
// the replies count them.
func (n Names) LogicPing(kind string) string { return "$SRV.PING." + n.LogicService(kind) }
