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

/** `record` frame of `outbox` and `mailbox` subscriptions. */
export interface RecordFrame {
  type: "record";
  sub: string;
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
  revision: number;
  effector: string;
  deleted?: boolean;
  document?: StateDocument;
}

/** `dead` frame of `dead` subscriptions. */
export interface DeadFrame {
  type: "dead";
  sub: string;
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
  | { type: "subscribed"; req?: string; sub: string }
  | { type: "unsubscribed"; req?: string; sub: string; reason?: string }
  | RecordFrame
  | RecordsFrame
  | StateFrame
  | DeadFrame
  | OrchestrationFrame;

/** Subscription topics and what each selects (docs/gateway.md, Subscriptions). */
export type SubscribeSpec =
  | { topic: "outbox"; effector: EffectorRef; from?: number }
  | { topic: "outbox"; kind: string; from?: number }
  | { topic: "mailbox"; effector: EffectorRef; from?: number }
  | { topic: "state"; effector: EffectorRef; from?: number }
  | { topic: "state"; kind: string; from?: number }
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
