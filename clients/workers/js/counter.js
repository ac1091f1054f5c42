// The counter kind of the Go demo (examples/kinds), as worker logic: state
// {"count": n}; a record of type "inc" with optional payload {"by": n}
// (default 1) adds to the count, emits a "count" record {"count": n} and,
// when the record has a reply subject, answers there too. Any other type is
// a permanent error (the record goes to dead letters).
import { PermanentError, emit, reply } from "./worker.js";

export function counter(record, state) {
  if (record.type !== "inc") {
    throw new PermanentError(`unknown record type ${JSON.stringify(record.type)}`);
  }
  const by = record.payload?.by ?? 1;
  if (!Number.isInteger(by)) {
    throw new PermanentError(`inc: "by" must be an integer, got ${JSON.stringify(by)}`);
  }
  const count = (state?.count ?? 0) + by;
  const records = [emit("count", { count })];
  if (record.reply) {
    records.push(reply("count", { count }));
  }
  return { state: { count }, records };
}
