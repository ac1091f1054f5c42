"""The effectors remote-kind protocol (docs/polyglot.md) for Python.

A worker serves the logic of one kind. The node keeps order, state,
effectively-once and dead letters; the worker only computes, for one record
and the current state, the new state and the records to send. It keeps
nothing between requests, so any number of workers may share a kind (a NATS
queue group) and a worker may die at any time: the node retries the record
it held.

This worker speaks the JSON encoding only (the standard library has no
msgpack): host the kind as `--remote-kinds name` (or `name:json`).
"""

import json
import os
import sys
import time

import nats_min

VERSION = 1
JSON_TYPE = "application/json"


class PermanentError(Exception):
    """An error retrying cannot fix: the record goes to dead letters at once.

    Any other exception the logic raises is retried with the kind's policy.
    """


def send(to, type_, payload=None, **extra):
    """A record to send to the mailbox of effector to ("kind/id")."""
    return {"op": "send", "to": to, "type": type_, "payload": payload, **extra}


def emit(type_, payload=None, **extra):
    """A record to publish on the effector's outbox."""
    return {"op": "emit", "type": type_, "payload": payload, **extra}


def reply(type_, payload=None, **extra):
    """A record answering the record in hand on its reply subject."""
    return {"op": "reply", "type": type_, "payload": payload, **extra}


def answer(logic, req):
    """The reply to one decoded request: logic(record, state, request) returns
    (state, records) or raises."""
    if req.get("v") != VERSION:
        return {"error": {"message": f"protocol version {req.get('v')}: this worker speaks {VERSION}", "permanent": True}}
    try:
        state, records = logic(req["record"], req["state"], req)
        return {"state": state, "records": list(records or [])}
    except PermanentError as err:
        return {"error": {"message": str(err), "permanent": True}}
    except Exception as err:  # a bug or a passing failure: retried
        return {"error": {"message": f"{type(err).__name__}: {err}", "permanent": False}}


def ping_reply(prefix, kind, instance, types):
    """The answer to a discovery ping (docs/polyglot.md, "Discovery"): the
    NATS micro protocol's ping response, naming this worker and the record
    types it handles."""
    return {"type": "io.nats.micro.v1.ping_response", "name": f"{prefix}-logic-{kind}", "id": instance,
            "version": "1.0.0", "metadata": {"kind": kind, "types": ",".join(types or [])}}


def serve(nc, kind, logic, prefix="ea", delay_ms=0, log=None, types=None):
    """Answers the requests of kind on nc forever, one at a time, in the
    kind's queue group; answers probes (header EA-Probe) and discovery pings
    (announcing types, the record types logic handles). Returns when the
    connection closes (raising)."""
    subject = f"{prefix}.logic.{kind}"
    ping = f"$SRV.PING.{prefix}-logic-{kind}"
    instance = os.urandom(8).hex()
    nc.subscribe(subject, queue=subject)
    nc.subscribe(ping)
    if log:
        log(f"ready: serving kind {kind} on {subject} (queue group {subject})")
    while True:
        m = nc.next_msg()
        if not m.reply:
            continue
        if m.subject == ping:
            nc.publish(m.reply, json.dumps(ping_reply(prefix, kind, instance, types)).encode())
            continue
        if m.headers.get("EA-Probe"):
            nc.publish(m.reply, b"")
            continue
        ct = m.headers.get("Content-Type", JSON_TYPE)
        if ct != JSON_TYPE:
            out = {"error": {"message": f"this worker speaks {JSON_TYPE} only, got {ct}: host the kind with the JSON encoding", "permanent": True}}
        else:
            try:
                req = json.loads(m.data)
            except ValueError as err:
                out = {"error": {"message": f"request is not JSON: {err}", "permanent": True}}
            else:
                if delay_ms > 0:
                    if log:
                        log(f"holding record {req.get('record', {}).get('id')} for {delay_ms} ms")
                    time.sleep(delay_ms / 1000)
                out = answer(logic, req)
        nc.publish(m.reply, json.dumps(out, separators=(",", ":")).encode())


def log_line(line):
    print(line, flush=True)


def stderr(line):
    print(line, file=sys.stderr, flush=True)
