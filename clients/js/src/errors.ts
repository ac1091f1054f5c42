// Typed errors: the gateway's error codes (docs/gateway.md, Errors and
// limits; web/errors.go) and the client's own. Match them by code, never by
// message text.

/** Codes of the gateway's error frames. */
export const GatewayCodes = [
  "bad_frame",
  "unknown_type",
  "bad_request",
  "not_found",
  "forbidden",
  "terminated",
  "exists",
  "conflict",
  "undeclared_type",
  "no_host",
  "not_waiting",
  "finished",
  "unavailable",
  "too_many_subscriptions",
  "duplicate_subscription",
  "unknown_subscription",
  "subscription_failed",
  "internal",
] as const;

/** A code of the gateway's error frames. */
export type GatewayCode = (typeof GatewayCodes)[number];

/**
 * Codes the client itself gives:
 * - `disconnected`: the connection dropped before the answer came (a request may or may not have been carried out);
 * - `timeout`: no answer within the request timeout;
 * - `unauthorized`: the gateway closed the connection with 4401 (a missing or wrong token);
 * - `closed`: the client was closed;
 * - `invalid`: bad input refused before anything was sent (an effector reference that cannot be one).
 */
export type ClientCode = "disconnected" | "timeout" | "unauthorized" | "closed" | "invalid";

/** Every code an {@link EffectorsError} may carry. */
export type ErrorCode = GatewayCode | ClientCode;

/** The error every failing call of this package rejects with. */
export class EffectorsError extends Error {
  /** What went wrong, for programs: compare this, not the message. */
  readonly code: ErrorCode | (string & {});
  /** True when the gateway sent it (an error frame); false when the client made it. */
  readonly fromGateway: boolean;
  /** The request name (`req`) the error answers, when it answers one. */
  readonly req?: string;
  /** The subscription name (`sub`) the error belongs to, when it does. */
  readonly sub?: string;

  constructor(code: ErrorCode | (string & {}), message: string, opts: { fromGateway?: boolean; req?: string; sub?: string } = {}) {
    super(message);
    this.name = "EffectorsError";
    this.code = code;
    this.fromGateway = opts.fromGateway ?? false;
    this.req = opts.req;
    this.sub = opts.sub;
  }
}

/** Reports whether err is an {@link EffectorsError}, with one of codes when any are given. */
export function isEffectorsError(err: unknown, ...codes: ErrorCode[]): err is EffectorsError {
  if (!(err instanceof EffectorsError)) {
    return false;
  }
  return codes.length === 0 || codes.includes(err.code as ErrorCode);
}

/** Close codes the gateway ends a connection with (besides 1001 going away and 1009 message too big). */
export const CloseCodes = {
  /** No token, a wrong token, or no auth frame in time. */
  unauthorized: 4401,
  /** Frames waited over 10 s for the client to read. */
  slowReader: 4408,
} as const;
