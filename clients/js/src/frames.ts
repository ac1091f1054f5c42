// Frames of the gateway's WebSocket protocol, as docs/gateway.md and
// web/frames.go define them (protocol version 1). Field names are the wire's.

/** The protocol version this package speaks (the welcome frame's `version`). */
export const PROTOCOL_VERSION = 1;

/** `<kind>/<id>`, each `[A-Za-z0-9_-]{1,128}`. */
export type EffectorRef = string;

/** A JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** The first frame the gateway sends once the connection is authorized. */
export interface WelcomeFrame {
  type: "welcome";
  /** The req of the auth frame it answers, on gateways that echo it. */
  req?: string;
  version: number;
  prefix: string;
  max_frame: number;
  max_subscriptions: number;
  send_buffer: number;
  /** The identity the connection acts as, on gateways with users. */
  user?: string;
  /** "admin" or "user", on gateways with users. */
  role?: string;
}

/** The record a `send` frame carries; every field is optional but `id`, which this client always sets. */
export interface OutRecord {
  /** The record id (Nats-Msg-Id): a re-send with the same id is stored once. */
  id?: string;
  /** Record type; the gateway's default is `message`. */
  type?: string;
  /** Any JSON value, stored as application/json. */
  payload?: unknown;
  process?: string;
  cause?: string;
  priority?: "high";
  /** RFC 3339; default: when the gateway got it. */
  time?: string;
}

/** `{"type":"ack"}`: the mailbox stream holds this record at `seq`. */
export interface AckFrame {
  type: "ack";
  req: string;
  id: string;
  stream: string;
  seq: number;
  /** The record was stored before (a re-send): nothing new was stored. */
  duplicate?: boolean;
}

/** A record as the record store shows it (docs/store.md). */
export interface RecordJSON {
  id: string;
  type?: string;
  from?: string;
  process?: string;
  owner?: string;
  cause?: string;
  reply?: string;
  priority?: string;
  time?: string;
  content_type?: string;
  subject: string;
  stream: string;
  seq: number;
  box: "mailbox" | "outbox" | string;
  effector?: string;
  stored: string;
  /** The raw body, base64. */
  payload?: string;
  /** The payload as JSON when it is JSON or msgpack. */
  json?: unknown;
  /** Set when the message breaks the record contract: why. */
  invalid?: string;
}

/** An effector's state document. */
export interface StateDocument {
  id: string;
  kind: string;
  status: "IDLE" | "BUSY" | "ERROR" | "TERMINATED" | string;
  state: unknown;
  seq: number;
  ahead?: number[];
  updated: string;
  error?: string;
  owner?: string;
}

/** A task of an orchestration out with a worker. */
export interface OrchestrationTask {
  id: string;
  step: string;
  worker: string;
  type: string;
  sent: string;
}

/** An orchestration as `orch.status` answers it. */
export interface Orchestration {
  id: string;
  name: string;
  status: "RUNNING" | "WAITING" | "COMPLETED" | "FAILED" | "CANCELLED" | string;
  step: string;
  waiting_for: string;
  prompt?: unknown;
  results: unknown;
  error: string;
  tasks?: OrchestrationTask[];
  steps: number;
  created: string;
  updated: string;
  owner?: string;
}

/**
 * A position per stream (kind-wide `outbox`: `{"EA_OUT_0_OF_3": 122, …}`) or per bucket
 * (kind-wide `state`: `{"ea_state_0_of_3": 40, …}`): the next sequence or revision to read of
 * each, that is the last one received + 1. A stream it does not name is read from its first
 * record, a bucket from its current documents. Valid only for the deployment and stream group
 * count it was read from (docs/gateway.md, *Resuming a kind: positions*).
 */
export type Positions = Record<string, number>;

/** `record` frame of `outbox` and `mailbox` subscriptions. */
export interface RecordFrame {
  type: "record";
  sub: string;
  /** The stream `seq` is in (`EA_OUT`, `EA_OUT_<g>_OF_<G>`, a mailbox stream): with `seq`, the record's position. */
  stream: string;
  seq: number;
  record: RecordJSON;
}

/** `records` frame: one page of the log; `cursor` resumes after it. */
export interface RecordsFrame {
  type: "records";
  sub: string;
  records: RecordJSON[];
  cursor: string;
  live: boolean;
}

/** `state` frame of `state` subscriptions. */
export interface StateFrame {
  type: "state";
  sub: string;
  /** The state bucket `revision` is in (`ea_state`, `ea_state_<g>_of_<G>`): with `revision`, the change's position. */
  bucket: string;
  revision: number;
  effector: string;
  deleted?: boolean;
  document?: StateDocument;
}

/** A dead letter, as `dead` frames and the `dead.list` request show it. */
export interface DeadLetter {
  /** Its sequence in the dead-letter stream (`dead.replay`, `dead.discard` take it). */
  seq: number;
  /** The dead letter's own id, `dead:<record id>`. */
  id: string;
  effector: string;
  reason: string;
  error: string;
  mailbox_seq?: number;
  mailbox_stream?: string;
  truncated?: string;
  stored: string;
  record: RecordJSON;
}

/** `dead` frame of `dead` subscriptions. */
export interface DeadFrame extends DeadLetter {
  type: "dead";
  sub: string;
}

/** `orchestration` frame of `orchestration` subscriptions. */
export interface OrchestrationFrame {
  type: "orchestration";
  sub: string;
  revision: number;
  id: string;
  deleted?: boolean;
  orchestration?: Orchestration;
}

/** `{"type":"error"}`. */
export interface ErrorFrame {
  type: "error";
  req?: string;
  sub?: string;
  code: string;
  error: string;
}

/** `{"type":"subscribed"}`: the subscription is in place; its frames follow. */
export interface SubscribedFrame {
  type: "subscribed";
  req?: string;
  sub: string;
  /** Kind-wide `outbox`: where each outbox stream starts (the next sequence it delivers), every stream named. */
  positions?: Positions;
}

/** `{"type":"result"}`: the answer of a request. */
export interface ResultFrame<T = unknown> {
  type: "result";
  req: string;
  result: T;
}

/** Any frame the gateway sends. */
export type ServerFrame =
  | WelcomeFrame
  | AckFrame
  | ResultFrame
  | ErrorFrame
  | { type: "pong"; req?: string }
  | SubscribedFrame
  | { type: "unsubscribed"; req?: string; sub: string; reason?: string }
  | RecordFrame
  | RecordsFrame
  | StateFrame
  | DeadFrame
  | OrchestrationFrame;

/**
 * Subscription topics and what each selects (docs/gateway.md, Subscriptions). `from` is a
 * sequence or revision of one stream or bucket; a kind-wide `outbox` or `state` subscription
 * starts from `positions` instead (one per stream or bucket; with stream groups `from` is
 * refused there): a vector kept from an earlier subscription's `position.positions`. Not both.
 */
export type SubscribeSpec =
  | { topic: "outbox"; effector: EffectorRef; from?: number }
  | { topic: "outbox"; kind: string; from?: number; positions?: Positions }
  | { topic: "mailbox"; effector: EffectorRef; from?: number }
  | { topic: "state"; effector: EffectorRef; from?: number }
  | { topic: "state"; kind: string; from?: number; positions?: Positions }
  | { topic: "records"; effector: EffectorRef; cursor?: string }
  | { topic: "records"; process: string; cursor?: string }
  | { topic: "dead"; effector?: EffectorRef; from?: number }
  | { topic: "orchestration"; id?: string; from?: number };

/** A subscription topic. */
export type Topic = SubscribeSpec["topic"];

/** The frame a subscription of each topic delivers. */
export interface TopicFrames {
  outbox: RecordFrame;
  mailbox: RecordFrame;
  state: StateFrame;
  records: RecordsFrame;
  dead: DeadFrame;
  orchestration: OrchestrationFrame;
}

/** A kind and the nodes hosting it (`kinds` request). */
export interface KindInfo {
  kind: string;
  nodes: string[];
  beat: string;
}

/** An effector of an `effectors` page. */
export interface EffectorInfo extends StateDocument {
  revision: number;
}

/** Fields of a `query` request (those of `ea.store.query`, docs/store.md). */
export interface Query {
  effector?: EffectorRef;
  box?: "mailbox" | "outbox";
  process?: string;
  owner?: string;
  type?: string;
  since?: string;
  until?: string;
  order?: "newest";
  limit?: number;
  cursor?: string;
}

/** A page of records (`query` request). */
export interface RecordPage {
  records: RecordJSON[];
  cursor?: string;
  more: boolean;
}

/** A page of effectors (`effectors` request). */
export interface EffectorPage {
  effectors: EffectorInfo[];
  cursor: string;
  more: boolean;
}

/** Fields of a `dead.list` request: all optional. */
export interface DeadListQuery {
  /** One effector's dead letters (not with `kind`). */
  effector?: EffectorRef;
  /** The dead letters of a kind's effectors (not with `effector`). */
  kind?: string;
  /** A reason code (`rejected`, `decode`, `failed`, …). */
  reason?: string;
  /** A case-insensitive search of the error, reason, record id and type (at most 256 bytes). */
  text?: string;
  /** Admins: only this owner's (a user's is always its own; another's is `forbidden`). */
  owner?: string;
  /** When the dead-letter stream stored it, RFC 3339, inclusive. */
  since?: string;
  until?: string;
  /** `newest` first, or absent: oldest first. */
  order?: "newest";
  /** 1 to 100; default 50. */
  limit?: number;
  /** The `cursor` of the previous page of the same query. */
  cursor?: string;
}

/** A page of dead letters (`dead.list`). */
export interface DeadPage {
  dead: DeadLetter[];
  /** Continues after this page; empty newest first once the beginning is reached. */
  cursor: string;
  /** More may match: ask again with `cursor`. */
  more: boolean;
}

/** Fields of an `orch.list` request: all optional. */
export interface OrchListQuery {
  status?: "RUNNING" | "WAITING" | "COMPLETED" | "FAILED" | "CANCELLED";
  /** The orchestration's definition name, exactly. */
  name?: string;
  /** A case-insensitive search of the id and name (at most 256 bytes). */
  search?: string;
  /** Admins: only this owner's (a user's is always its own). */
  owner?: string;
  /** When it was started, RFC 3339, inclusive. */
  since?: string;
  until?: string;
  /** `newest` (most recently changed) first, or absent: least recently changed first. */
  order?: "newest";
  /** 1 to 100; default 50. */
  limit?: number;
  cursor?: string;
}

/** An orchestration as `orch.list` lists it (no prompt, results or tasks: `orch.status` has them). */
export interface OrchSummary {
  id: string;
  name: string;
  status: string;
  step: string;
  steps: number;
  waiting_for?: string;
  error?: string;
  owner?: string;
  created: string;
  updated: string;
  /** Its revision in the orchestration bucket (an `orchestration` subscription's `from`). */
  revision: number;
}

/** A page of orchestrations (`orch.list`). */
export interface OrchPage {
  orchestrations: OrchSummary[];
  cursor: string;
  more: boolean;
}

/** The result of `dead.replay`: the record sent again. */
export interface DeadReplayResult {
  /** The new record's id; `cause`, the original's. */
  id: string;
  cause: string;
  effector: string;
  type: string;
  /** The new record's sequence in the mailbox stream. */
  seq: number;
  /** The replayed dead letter's sequence. */
  dead_seq: number;
}

/** One partition of a kind: its lease and its consumer's counts. */
export interface PartitionInfo {
  kind: string;
  partition: number;
  node?: string;
  since?: string;
  /** Deliveries acknowledged (the consumer's ack floor). */
  done: number;
  /** Records stored and not yet acknowledged. */
  pending: number;
  error?: string;
}

/** A node as placement knows it. */
export interface NodeInfo {
  id: string;
  kinds: string[];
  started: string;
  beat: string;
  partitions: PartitionInfo[];
  done: number;
  pending: number;
}

/** The result of `nodes` (admins). */
export interface NodesResult {
  time: string;
  nodes: NodeInfo[];
  unheld: PartitionInfo[];
  partitions: number;
  index_lag: number;
  index_lag_error?: string;
}
