// The errors a call can throw. A refusal is not one of them: an enforced deny is an answer (HTTP
// 200, `outcome: "deny"`). The server's problem documents (RFC 9457, application/problem+json)
// become a ProblemError of the class for their status, carrying the document and its located
// problems; a request that never got an answer becomes a ConnectionError.

import type { LocatedProblem, Problem } from "./types.js";

const PROBLEM_BASE = "https://prunewarden.dev/problems/";

/** The kinds of problem the server writes (docs/server.md); `type` without its base URL. */
export type ProblemKind =
  | "invalid-input"
  | "unauthorized"
  | "not-found"
  | "method-not-allowed"
  | "request-timeout"
  | "session-conflict"
  | "tenant-conflict"
  | "session-state-rejected"
  | "request-too-large"
  | "audit-unavailable"
  | "deadline-exceeded"
  | "session-store-unavailable"
  | "server-busy"
  | "not-ready";

/** Every error this package throws. */
export class PrunewardenError extends Error {
  override name = "PrunewardenError";
}

/** The server answered with a problem document (or, from a proxy in between, an error page). */
export class ProblemError extends PrunewardenError {
  override name = "ProblemError";
  /** The HTTP status. */
  readonly status: number;
  /** The problem document as the server wrote it. */
  readonly problem: Problem;
  /** The problem's type without the base URL ("session-conflict"), or the full type if foreign. */
  readonly kind: ProblemKind | (string & {});
  /** How many tries the call made before this answer. */
  readonly attempts: number;

  constructor(status: number, problem: Problem, attempts = 1) {
    super(`HTTP ${status} ${problemKind(problem.type)}: ${problem.detail || problem.title}`);
    this.status = status;
    this.problem = problem;
    this.kind = problemKind(problem.type);
    this.attempts = attempts;
  }

  /** The located problems (file, line, column, JSON path, message), empty when there are none. */
  get problems(): LocatedProblem[] {
    return this.problem.problems ?? [];
  }
}

/** 400: the request document is not valid; `problems` locates every fault in `<request>`. */
export class InvalidInputError extends ProblemError {
  override name = "InvalidInputError";
}

/** 401: the server has a token and the request did not present it. */
export class UnauthorizedError extends ProblemError {
  override name = "UnauthorizedError";
}

/** 404 or 405: no such route, session or schema. */
export class NotFoundError extends ProblemError {
  override name = "NotFoundError";
}

/** 408: the body did not arrive in time. */
export class RequestTimeoutError extends ProblemError {
  override name = "RequestTimeoutError";
}

/**
 * 409: a cycle or turn out of order, a session busy elsewhere, a stored state rejected, or a
 * session bound to another tenant than the one the labels choose (`tenant-conflict`).
 */
export class SessionConflictError extends ProblemError {
  override name = "SessionConflictError";
}

/** 413: the body is over the server's --max-request-bytes (`problem.limit`). */
export class RequestTooLargeError extends ProblemError {
  override name = "RequestTooLargeError";
}

/**
 * 503: the server could not answer now. `audit-unavailable` (the decision could not be logged,
 * so none is returned), `deadline-exceeded`, `session-store-unavailable`, `server-busy`,
 * `not-ready`. Idempotent calls were already retried before this was thrown.
 */
export class ServiceUnavailableError extends ProblemError {
  override name = "ServiceUnavailableError";
}

/** No answer: the server could not be reached, the connection broke, or the call timed out. */
export class ConnectionError extends PrunewardenError {
  override name = "ConnectionError";
  /** The system or undici error code (ECONNREFUSED, UND_ERR_SOCKET, ...), or "timeout". */
  readonly code: string;
  readonly attempts: number;

  constructor(message: string, code: string, attempts: number, cause: unknown) {
    super(message, { cause });
    this.code = code;
    this.attempts = attempts;
  }
}

const BY_STATUS: Record<number, typeof ProblemError> = {
  400: InvalidInputError,
  401: UnauthorizedError,
  404: NotFoundError,
  405: NotFoundError,
  408: RequestTimeoutError,
  409: SessionConflictError,
  413: RequestTooLargeError,
  503: ServiceUnavailableError,
};

function problemKind(type: unknown): string {
  const text = typeof type === "string" ? type : "about:blank";
  return text.startsWith(PROBLEM_BASE) ? text.slice(PROBLEM_BASE.length) : text;
}

/**
 * The error for an answer of `status` >= 400 whose body is `text`: the problem document it
 * holds, or one standing in for a body that is not one (a proxy's HTML page).
 */
export function problemError(status: number, text: string, attempts = 1): ProblemError {
  const ErrorClass = BY_STATUS[status] ?? ProblemError;
  return new ErrorClass(status, parseProblem(status, text), attempts);
}

function parseProblem(status: number, text: string): Problem {
  try {
    const document: unknown = JSON.parse(text);
    if (isProblem(document)) return document;
  } catch {
    // not JSON: described below
  }
  return {
    type: "about:blank",
    title: `HTTP ${status}`,
    status,
    detail: text.slice(0, 200) || `HTTP ${status} without a problem document`,
  };
}

function isProblem(value: unknown): value is Problem {
  if (typeof value !== "object" || value === null) return false;
  const document = value as Record<string, unknown>;
  return typeof document.type === "string" && typeof document.status === "number";
}
