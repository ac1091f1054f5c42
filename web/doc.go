// Package web is the gateway through which people and programs outside
// NATS reach effectors: a WebSocket endpoint speaking a JSON frame protocol
// (send records with acknowledgement once stored, subscribe to outboxes,
// state, process logs, dead letters and orchestrations with resume points,
// drive orchestrations, replay and discard dead letters, see the nodes), and
// a console (the live view: effectors, records, orchestrations, dead letters,
// nodes) served from the same address. The protocol is documented with an example of every frame in
// docs/gateway.md.
//
// # Serving
//
//	gw, err := web.New(ctx, conn, web.Config{Addr: "127.0.0.1:9466"})
//	go gw.Run(ctx) // GET / (the console), GET /ws (WebSocket)
//
// ea-supervisor (and every supervisord binary) serves it on --gateway.
// [Gateway.Handler] mounts it in another server (call [Gateway.Close] at the
// end). Orchestration requests go through supervisor.Client to whichever
// supervisors answer the orchestration API, in this process or not.
//
// # Acknowledged sends
//
// A send frame's ack comes only after JetStream stored the record
// (PubAck), with the record id and stream sequence: the client moves the
// record from local_only to acked. A client that reconnects re-sends what
// was not acked with the same id: within JetStream's duplicate window the
// stream drops the copy; past it, the gateway finds the id in the record
// store (package store) and answers the ack of the stored record without
// publishing it again.
//
// # Resuming subscriptions
//
// Every subscription frame carries its resume point: outbox, mailbox and
// dead-letter frames their stream sequence (resume with from: seq+1), state
// and orchestration frames their KV revision (from: revision+1), records
// frames (a page of a process's or an effector's log) a store cursor.
// Record frames also name their stream and state frames their bucket: the
// kind-wide outbox and state topics read several with stream groups, and
// resume from a position per stream or bucket ("positions":
// {"<stream>": seq+1}; [SubscribeFrame].Positions), a vector the
// subscribed frame of a kind-wide outbox starts for the client.
//
// # Console requests
//
// [TypeDeadReplay] sends a dead letter's record again as a new record linked
// to it (EA-Cause the original's id), as ea dead replay does;
// [TypeDeadDiscard] deletes a dead letter; [TypeNodes] (admins) reads
// placement: nodes, the partitions each reads with their consumers' counts
// ([NodesResult]), and the record store's index lag. [TypeDeadList] and
// [TypeOrchList] return a page of dead letters or orchestrations, filtered
// and paged by the gateway ([DeadListResult], [OrchListResult]; at most
// [MaxListLimit] a page), each connection seeing its own (an admin all).
//
// # Users
//
// Each token maps to an [Identity] (a name and a [Role]) through a users
// file of token hashes ([Config.UsersFile], [ParseUsers]), re-read when it
// changes; the shared [Config.Token] is the identity [AdminName]. The
// gateway sets EA-Owner to the identity's name on every record it sends,
// effector it creates and orchestration it starts; a [RoleUser] sees and
// acts on only what carries its name (effectors it owns, records with its
// EA-Owner, its orchestrations), others' things are refused with
// [CodeForbidden]; a [RoleAdmin] sees everything. A token removed from the
// file closes the connections that used it (4401).
//
// # Limits
//
// A users file or a token is required on any address beyond loopback;
// browsers' origins are checked; frames above [Config.MaxFrame]
// close the connection (1009); each connection has at most
// [Config.MaxSubscriptions] subscriptions and a send buffer of
// [Config.SendBuffer] bytes, and a client that does not read within
// [Config.SlowReader] is disconnected (4408). Bad frames get an error frame
// with a code ([CodeBadFrame], [CodeUnknownType], [CodeBadRequest], …) and
// the connection goes on.
package web
