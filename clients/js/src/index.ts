// @effectors/client: a typed client of the effectors WebSocket gateway
// (docs/gateway.md). This entry point runs in browsers and in Node; the
// "./node" entry point adds FileStore.

export { Client } from "./client.js";
export type {
  ClientEvents,
  ClientOptions,
  SendHandle,
  SendStatus,
  SendUpdate,
  Status,
  SubscribeOptions,
  Subscription,
  SubscriptionPosition,
  SubscriptionStatus,
  WebSocketConstructor,
  WebSocketLike,
} from "./client.js";
export { CloseCodes, EffectorsError, GatewayCodes, isEffectorsError } from "./errors.js";
export type { ClientCode, ErrorCode, GatewayCode } from "./errors.js";
export { PROTOCOL_VERSION } from "./frames.js";
export type * from "./frames.js";
export { IndexedDBStore } from "./indexeddb.js";
export { MemoryStore } from "./store.js";
export type { PendingSend, SendStore } from "./store.js";
