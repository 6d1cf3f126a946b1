// @prunewarden/client: a typed client of `prunewarden serve` (API v1) for Node 20 and later.

export { Client, Session, decisionIds } from "./client.js";
export type { ClientOptions, PlanOptions, PruneOptions, VerifyOptions } from "./client.js";
export {
  ConnectionError,
  InvalidInputError,
  NotFoundError,
  ProblemError,
  PrunewardenError,
  RequestTimeoutError,
  RequestTooLargeError,
  ServiceUnavailableError,
  SessionConflictError,
  UnauthorizedError,
} from "./errors.js";
export type { ProblemKind } from "./errors.js";
export type { RetryOptions, TransportOptions } from "./transport.js";
export type * from "./types.js";
