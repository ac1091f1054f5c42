// Package kv keeps typed state in a JetStream key-value bucket: a [Store] of
// T reads and writes values of type T, encoded as msgpack with the module's
// codec (struct fields named by their json tags), so any language reads them
// as maps.
//
//	st, err := kv.Open[Counter](ctx, js, "ea_state")
//	e, err := st.Get(ctx, "counter.c1")              // value and revision
//	rev, err := st.Update(ctx, "counter.c1", next, e.Revision)
//
// Callers never need to import jetstream to handle errors: the store maps
// them to [ErrNotFound], [ErrExists], [ErrConflict] and [ErrInvalidKey], and
// reports values that no longer fit T as a [*DecodeError].
//
// # Keys
//
// A key is one or more tokens of letters, digits and - _ / = separated by
// single dots, e.g. "counter.c1". [Store.Watch] and [Store.Keys] also take
// patterns: * stands for one token, > (last) for one or more. Keys are
// checked before any I/O and a bad one gives [ErrInvalidKey] saying why.
//
// # Revisions
//
// Every write returns the key's new revision: the sequence number of the
// write in the bucket's stream. Revisions grow with every write to any key of
// the bucket, so those of one key are increasing but not consecutive. A
// delete writes a marker with its own revision: [Store.Get] then reports
// [ErrNotFound], and [Store.Watch] and [Store.History] show the marker as an
// entry with Deleted set.
//
// # Compare-and-set
//
// [Store.Update] writes only if the key's latest revision is still the one
// the caller read, otherwise it returns a [*ConflictError] (matching
// [ErrConflict]) and writes nothing; [Store.Create] writes only if the key has
// no value ([ErrExists] otherwise). This is optimistic concurrency: keep the
// revision from your last read or write next to the value, write with it, and
// on a conflict read again and redo the change. [Store.Modify] does that loop
// for a function of the current value. Keeping the revision in memory makes a
// state transition one round trip instead of two; [WithPublisher] makes that
// round trip cheaper, writing through a shared publisher such as
// bus.Publisher.
//
// # History
//
// A bucket keeps, per key, as many revisions as its History setting (1 by
// default), and JetStream allows at most 64. Older revisions are dropped as
// new ones arrive: [Store.History] returns what is kept, and
// [Store.GetRevision] reports [ErrNotFound] for a dropped revision. Do not use
// a key's history as a log; publish records to a stream for that.
//
// # Watching
//
// [Store.Watch] is a range-over-func iterator: it yields the current values,
// then every change, until its context is done or the loop breaks, and
// releases the watcher either way.
package kv
