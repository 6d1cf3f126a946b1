// Types of prunewarden.mjs for TypeScript agents. The documents are those of the bundled JSON
// Schemas (decision.v1, input.v1); only the fields a caller usually reads are spelled out.

export interface PolicyIdentity { name: string; version: string; digest: string }
export interface Reason { code: string; message: string; detail: Record<string, unknown> }
export interface Decision {
  decision_id: string;
  check: "collapse" | "eviction" | "staleness";
  outcome: "allow" | "deny" | "halt";
  enforced: boolean;
  reasons: Reason[];
  actions: { action: string; ids: string[] }[];
  policy: PolicyIdentity;
  kept?: string[];
  evicted?: string[];
}
export interface Plan { evict: string[]; tombstones: string[]; frozen: boolean; target_met: boolean; decisions: Decision[] }
export interface Problem { type: string; title: string; status: number; detail: string; problems?: { path: string; message: string; text: string }[] }

export function decisionIds(answer: Decision | Plan | object): string[];

export class ProblemError extends Error { status: number; problem: Problem }

export class Client {
  constructor(url: string, options?: { token?: string; timeoutMs?: number });
  evaluate(document: object, options?: { sessionId?: string }): Promise<Decision>;
  plan(document: object): Promise<Plan>;
  policy(): Promise<{ policy: PolicyIdentity; digest: string; document: object }>;
  ready(): Promise<object>;
  session(sessionId: string): Session;
}

export class Session {
  observeCycle(scores: Record<string, number>, pinned?: string[], options?: { cycle?: number }): Promise<Decision>;
  observeTurn(meanRelevance: number, tokens: number, options?: { turn?: number }): Promise<object>;
  authorize(segment: object, score: number, perturbedScore?: number | null, evictionCandidates?: string[]): Promise<Decision>;
  prune(spans: object[], keepTopK: number, options?: { turn?: object; tombstones?: string[]; recomputeBudget?: number }): Promise<Decision>;
  plan(segments: object[], options?: { freeTokens?: number; keepTopK?: number; turn?: object; tombstones?: string[]; recomputeBudget?: number }): Promise<Plan>;
  verify(before: object[], after: object[], options?: { tombstones?: string[]; appliedBy?: string; reported?: { spans_modified: number; scores_invalidated: number }; canaries?: string[] }): Promise<Decision>;
  state(): Promise<object>;
  delete(): Promise<object>;
}
