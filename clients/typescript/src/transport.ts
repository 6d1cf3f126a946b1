// How a call reaches the server: one undici Agent per client, so connections are kept alive and
// reused (TCP or a unix socket), and the retry rules.
//
// Retries: a try is repeated, after an exponential backoff with full jitter, when repeating it
// cannot apply anything twice:
// - an idempotent call (GET, DELETE, and the stateless POST /v1/evaluate and /v1/plan, whose
//   repeat decides the same document again) on a 503 or on a connection that failed or broke;
// - any call when the server read nothing of it: the connection was refused, or the answer is 503
//   `server-busy` (the server refuses at a limit before it reads the request).
// A session change (a cycle, turn, eviction, prune, plan or transition) that broke mid-way or got
// another 503 is not repeated: the server may have decided it, and the caller decides.

import { Agent, type Dispatcher } from "undici";
import { ConnectionError, problemError } from "./errors.js";

export interface RetryOptions {
  /** Tries in all, the first included (1: never retry). Default 3. */
  attempts?: number;
  /** The first backoff's ceiling, doubled for each later try. Default 50 ms. */
  baseDelayMs?: number;
  /** The largest backoff. Default 2,000 ms. */
  maxDelayMs?: number;
}

export interface TransportOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string | undefined;
  /**
   * Sent with every call as `Prunewarden-Labels: name=value, ...`: on a server of tenants
   * (`serve --tenants`) they choose the tenant whose policy decides. A name holds no `=` or
   * `,`, a value no `,` (put such a label in the document's `labels`).
   */
  labels?: Record<string, string> | undefined;
  /**
   * The longest one try waits for the answer's headers, and then between chunks of its body.
   * Default 30,000 ms (the server's own --request-timeout is 30 s).
   */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Connections kept to the server at most. Default 16. */
  connections?: number;
  /**
   * How long an idle connection is kept. Default 4,000 ms: below the server's
   * --keep-alive-timeout (5 s), so the client never sends on a connection the server is closing.
   */
  keepAliveTimeoutMs?: number;
}

export interface Call {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  /** Whether the call may be repeated after an ambiguous failure (see above). */
  idempotent: boolean;
}

interface Answer {
  status: number;
  text: string;
}

const UNIX = "unix:";
// Connection failures after which nothing reached the server.
const NOT_SENT = new Set(["ECONNREFUSED", "ENOENT", "UND_ERR_CONNECT_TIMEOUT"]);

export class Transport {
  readonly origin: string;
  private readonly agent: Agent;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(url: string, options: TransportOptions = {}) {
    const keepAliveTimeout = options.keepAliveTimeoutMs ?? 4000;
    const connections = options.connections ?? 16;
    if (url.startsWith(UNIX)) {
      const socketPath = url.slice(UNIX.length);
      if (socketPath === "") throw new TypeError("a unix: address names the socket's path");
      this.origin = "http://localhost";
      this.agent = new Agent({ connect: { socketPath }, keepAliveTimeout, connections });
    } else {
      const parsed = new URL(url);
      if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
        throw new TypeError(`not an http(s): or unix: address: ${url}`);
      }
      this.origin = parsed.origin;
      this.agent = new Agent({ keepAliveTimeout, connections });
    }
    this.headers = { accept: "application/json, application/problem+json" };
    if (options.token) this.headers.authorization = `Bearer ${options.token}`;
    const labels = labelsHeader(options.labels ?? {});
    if (labels !== "") this.headers["prunewarden-labels"] = labels;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.attempts = Math.max(1, options.retry?.attempts ?? 3);
    this.baseDelayMs = options.retry?.baseDelayMs ?? 50;
    this.maxDelayMs = options.retry?.maxDelayMs ?? 2000;
  }

  /** The answer's document; a problem or a failure thrown as an error, after the retries due. */
  async send<T>(call: Call): Promise<T> {
    const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
    for (let attempt = 1; ; attempt += 1) {
      const last = attempt >= this.attempts;
      let answer: Answer;
      try {
        answer = await this.once(call, payload);
      } catch (error) {
        const code = errorCode(error);
        if (last || !(call.idempotent || NOT_SENT.has(code))) {
          throw new ConnectionError(
            `${call.method} ${call.path}: ${describe(error)} (${attempt} ${attempt === 1 ? "try" : "tries"})`,
            code,
            attempt,
            error,
          );
        }
        await this.backoff(attempt);
        continue;
      }
      if (answer.status < 400) return (answer.text === "" ? null : JSON.parse(answer.text)) as T;
      const error = problemError(answer.status, answer.text, attempt);
      const retryable = answer.status === 503 && (call.idempotent || error.kind === "server-busy");
      if (last || !retryable) throw error;
      await this.backoff(attempt);
    }
  }

  /** Closes the kept connections once the calls under way are answered. */
  close(): Promise<void> {
    return this.agent.close();
  }

  private async once(call: Call, payload: string | undefined): Promise<Answer> {
    const headers =
      payload === undefined
        ? this.headers
        : { ...this.headers, "content-type": "application/json" };
    const options: Dispatcher.RequestOptions = {
      origin: this.origin,
      path: call.path,
      method: call.method,
      headers,
      body: payload ?? null,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    };
    const response = await this.agent.request(options);
    return { status: response.statusCode, text: await response.body.text() };
  }

  private backoff(attempt: number): Promise<void> {
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
    const delay = Math.random() * ceiling;
    return new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** The `Prunewarden-Labels` header of `labels` ("" for none); a TypeError for a label it cannot carry. */
export function labelsHeader(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([name, value]) => {
      if (name.trim() === "" || /[=,]/.test(name)) {
        throw new TypeError(
          `a label's name is not empty and holds no '=' or ',': ${JSON.stringify(name)}`,
        );
      }
      if (value.includes(",")) {
        throw new TypeError(
          `label ${name}: a value sent in Prunewarden-Labels holds no ',' (put it in the document's labels)`,
        );
      }
      return `${name}=${value}`;
    })
    .join(", ");
}

function errorCode(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const { code, cause } = error as { code?: unknown; cause?: unknown };
    if (typeof code === "string") return code;
    if (cause !== undefined) return errorCode(cause);
  }
  return "UNKNOWN";
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
