// The client of `prunewarden serve` (API v1) and its sessions: the calls of prunewarden's
// Session, in camelCase, with the request and answer documents typed from the OpenAPI document.

import { Transport, type Call, type TransportOptions } from "./transport.js";
import type {
  Decision,
  EvictionDocument,
  Health,
  InputDocument,
  Plan,
  PlanDocument,
  Policies,
  PolicyInForce,
  Readiness,
  Scores,
  Segment,
  SessionDeleted,
  SessionState,
  Span,
  StalenessDocument,
  TransitionDocument,
  TransitionSegment,
  TurnObserved,
  TurnStats,
  WindowSegment,
} from "./types.js";

export type ClientOptions = TransportOptions;

/** The ids of the decisions an answer carries: a decision's own, or every decision of a plan. */
export function decisionIds(answer: Decision | Plan | object): string[] {
  if ("decision_id" in answer && typeof answer.decision_id === "string")
    return [answer.decision_id];
  if ("decisions" in answer && Array.isArray(answer.decisions)) {
    return (answer.decisions as Decision[]).map((decision) => decision.decision_id);
  }
  return [];
}

/**
 * A client of one server: `http://127.0.0.1:8181` or `unix:/run/prunewarden/pdp.sock`. It keeps
 * its connections alive until `close()`.
 */
export class Client {
  readonly url: string;
  /** @internal */
  readonly transport: Transport;

  constructor(url: string, options: ClientOptions = {}) {
    this.url = url;
    this.transport = new Transport(url, options);
  }

  /** `POST /v1/evaluate`: a decision on an input document; a halted session of `sessionId` refuses it. */
  evaluate(document: InputDocument, options: { sessionId?: string } = {}): Promise<Decision> {
    const query =
      options.sessionId === undefined ? "" : `?session_id=${encodeURIComponent(options.sessionId)}`;
    return this.send({
      method: "POST",
      path: `/v1/evaluate${query}`,
      body: document,
      idempotent: true,
    });
  }

  /** `POST /v1/plan`: a pruning pass over a window, with every decision. */
  plan(document: PlanDocument): Promise<Plan> {
    return this.send({ method: "POST", path: "/v1/plan", body: document, idempotent: true });
  }

  /**
   * `GET /v1/policy`: the identity, digest, files and resolved document in force (of the tenant
   * the client's `labels` choose, named in `tenant`, on a server of tenants).
   */
  policy(): Promise<PolicyInForce> {
    return this.send({ method: "GET", path: "/v1/policy", idempotent: true });
  }

  /** `GET /v1/policies`: every tenant of the server, its selector, policy, shadow and health. */
  policies(): Promise<Policies> {
    return this.send({ method: "GET", path: "/v1/policies", idempotent: true });
  }

  /** `GET /readyz`; a ServiceUnavailableError (`not-ready`) when the audit log cannot be written. */
  ready(): Promise<Readiness> {
    return this.send({ method: "GET", path: "/readyz", idempotent: true });
  }

  /** `GET /healthz`: the process is up. */
  health(): Promise<Health> {
    return this.send({ method: "GET", path: "/healthz", idempotent: true });
  }

  /** One session held by the server under `sessionId` (one path segment: no '/'). */
  session(sessionId: string): Session {
    return new Session(this, sessionId);
  }

  /** Closes the kept-alive connections once the calls under way are answered. */
  close(): Promise<void> {
    return this.transport.close();
  }

  /** @internal */
  send<T>(call: Call): Promise<T> {
    return this.transport.send<T>(call);
  }
}

export interface PruneOptions {
  turn?: TurnStats;
  tombstones?: string[];
  recomputeBudget?: number;
}

export interface PlanOptions extends PruneOptions {
  freeTokens?: number;
  keepTopK?: number;
}

export interface VerifyOptions {
  tombstones?: string[];
  appliedBy?: string;
  reported?: TurnStats;
  canaries?: string[];
}

/** The session's calls: each changes the session, and none is repeated after an ambiguous failure. */
export class Session {
  readonly client: Client;
  readonly sessionId: string;
  private readonly path: string;

  constructor(client: Client, sessionId: string) {
    if (sessionId === "" || sessionId.includes("/")) {
      throw new TypeError("a session id is not empty and holds no '/'");
    }
    this.client = client;
    this.sessionId = sessionId;
    this.path = `/v1/sessions/${encodeURIComponent(sessionId)}`;
  }

  /** One collapse cycle (`cycle` left out: the next one); the collapse decision on the history. */
  observeCycle(
    scores: Scores,
    pinned: string[] = [],
    options: { cycle?: number } = {},
  ): Promise<Decision> {
    const body = { scores, pinned, ...pick({ cycle: options.cycle }) };
    return this.change("cycles", body);
  }

  /** One turn's relevance and size (`turn` left out: the next one); turns decide nothing. */
  observeTurn(
    meanRelevance: number,
    tokens: number,
    options: { turn?: number } = {},
  ): Promise<TurnObserved> {
    const body = { mean_relevance: meanRelevance, tokens, ...pick({ turn: options.turn }) };
    return this.change("turns", body);
  }

  /** The eviction guard for one segment, refused `pruning_halted` while the session is halted. */
  authorize(
    segment: Segment,
    score: number,
    perturbedScore: number | null = null,
    evictionCandidates: string[] = [],
  ): Promise<Decision> {
    const body: EvictionDocument = {
      check: "eviction",
      segment,
      score,
      perturbed_score: perturbedScore,
      eviction_candidates: evictionCandidates,
    };
    return this.change("evictions", body);
  }

  /** The staleness guard over spans, on the turns the session has seen. */
  prune(spans: Span[], keepTopK: number, options: PruneOptions = {}): Promise<Decision> {
    const body: StalenessDocument = {
      check: "staleness",
      spans,
      keep_top_k: keepTopK,
      tombstones: options.tombstones ?? [],
      ...pick({ turn: options.turn, recompute_budget: options.recomputeBudget }),
    };
    return this.change("prunes", body);
  }

  /** A pruning pass over a window, on the session's history and halt. */
  plan(segments: WindowSegment[], options: PlanOptions = {}): Promise<Plan> {
    const body: PlanDocument = {
      segments,
      tombstones: options.tombstones ?? [],
      ...pick({
        free_tokens: options.freeTokens,
        keep_top_k: options.keepTopK,
        turn: options.turn,
        recompute_budget: options.recomputeBudget,
      }),
    };
    return this.change("plans", body);
  }

  /** An edit made by other code, judged from the window before and after it. */
  verify(
    before: TransitionSegment[],
    after: TransitionSegment[],
    options: VerifyOptions = {},
  ): Promise<Decision> {
    const body: TransitionDocument = {
      check: "transition",
      before,
      after,
      tombstones: options.tombstones ?? [],
      canaries: options.canaries ?? [],
      ...pick({ applied_by: options.appliedBy, reported: options.reported }),
    };
    return this.change("transitions", body);
  }

  /** `GET`: the session's state (session-state.v4) and whether it is halted. */
  state(): Promise<SessionState> {
    return this.client.send({ method: "GET", path: this.path, idempotent: true });
  }

  /** `DELETE`: forgets the session, its history and its halt. */
  delete(): Promise<SessionDeleted> {
    return this.client.send({ method: "DELETE", path: this.path, idempotent: true });
  }

  private change<T>(route: string, body: object): Promise<T> {
    return this.client.send({
      method: "POST",
      path: `${this.path}/${route}`,
      body,
      idempotent: false,
    });
  }
}

// The fields whose value is given: the server fills in the rest.
function pick<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(fields).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}
