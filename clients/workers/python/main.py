"""A worker process for a remote kind whose logic is the counter:

    NATS_URL=nats://127.0.0.1:4222 EA_KIND=counter python3 main.py

with ea-node --remote-kinds counter. Settings, from the environment:
NATS_URL (default nats://127.0.0.1:4222), EA_PREFIX (default ea), EA_KIND
(default counter), EA_WORKER_DELAY_MS (hold every request that long before
answering: to see timeouts and failover). It prints "ready" once subscribed.
Standard library only.
"""

import os
import sys

import effectors_worker as ew
import nats_min


def counter(record, state, _req):
    """The counter kind of the Go demo (examples/kinds): state {"count": n};
    "inc" with optional payload {"by": n} (default 1) adds to the count, emits
    "count" {"count": n} and answers the record's reply subject if it has
    one. Any other type is a permanent error."""
    if record["type"] != "inc":
        raise ew.PermanentError(f"unknown record type {record['type']!r}")
    payload = record.get("payload") or {}
    by = payload.get("by", 1) if isinstance(payload, dict) else 1
    if not isinstance(by, int) or isinstance(by, bool):
        raise ew.PermanentError(f'inc: "by" must be an integer, got {by!r}')
    count = ((state or {}).get("count") or 0) + by
    records = [ew.emit("count", {"count": count})]
    if record.get("reply"):
        records.append(ew.reply("count", {"count": count}))
    return {"count": count}, records


def main():
    url = os.environ.get("NATS_URL") or "nats://127.0.0.1:4222"
    prefix = os.environ.get("EA_PREFIX") or "ea"
    kind = os.environ.get("EA_KIND") or "counter"
    delay_ms = int(os.environ.get("EA_WORKER_DELAY_MS") or 0)
    nc = nats_min.Client(url, name=f"effectors-worker-python {kind}")
    try:
        ew.serve(nc, kind, counter, prefix=prefix, delay_ms=delay_ms, log=ew.log_line, types=["inc"])
    except (ConnectionError, nats_min.ProtocolError) as err:
        ew.stderr(f"connection lost: {err}")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        nc.close()


if __name__ == "__main__":
    sys.exit(main())
