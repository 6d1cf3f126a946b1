// A dependency-free client of `prunewarden serve` (API v1) for Node 20 and later.
//
// TCP addresses go through the built-in fetch; `unix:/path.sock` addresses through node:http,
// which can reach a unix socket (fetch cannot without a dispatcher from a package). Answers are
// the server's JSON documents; a problem document (RFC 9457) is thrown as a ProblemError
// carrying it, with the located problems the CLI would print. Decision ids are read from the
// body (decisionIds): the Prunewarden-Decision-Ids header lists at most 64 of them.

import http from "node:http";

export class ProblemError extends Error {
  constructor(status, problem) {
    super(`HTTP ${status}: ${problem.detail ?? problem.title ?? ""}`);
    this.name = "ProblemError";
    this.status = status;
    this.problem = problem;
  }
}

// The ids of the decisions an answer carries: a decision's own id, or every decision of a plan.
export function decisionIds(answer) {
  if (answer?.decision_id !== undefined) return [answer.decision_id];
  return (answer?.decisions ?? []).map((decision) => decision.decision_id);
}

export class Client {
  /**
   * @param {string} url "http://127.0.0.1:8181" or "unix:/run/prunewarden/pdp.sock"
   * @param {{token?: string, timeoutMs?: number}} [options]
   */
  constructor(url, { token, timeoutMs = 30000 } = {}) {
    this.url = url.replace(/\/+$/, "");
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  async request(method, path, body) {
    const headers = { accept: "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const text = body === undefined ? undefined : JSON.stringify(body);
    if (text !== undefined) headers["content-type"] = "application/json";
    const { status, payload } = this.url.startsWith("unix:")
      ? await this.#overSocket(method, path, headers, text)
      : await this.#overFetch(method, path, headers, text);
    const document = payload ? JSON.parse(payload) : null;
    if (status >= 400) throw new ProblemError(status, document ?? {});
    return document;
  }

  async #overFetch(method, path, headers, body) {
    const response = await fetch(this.url + path, {
      method,
      headers,
      body,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    return { status: response.status, payload: await response.text() };
  }

  #overSocket(method, path, headers, body) {
    const socketPath = this.url.slice("unix:".length);
    return new Promise((resolve, reject) => {
      const request = http.request(
        { socketPath, path, method, headers, timeout: this.timeoutMs },
        (response) => {
          const chunks = [];
          response.on("data", (chunk) => chunks.push(chunk));
          response.on("end", () =>
            resolve({ status: response.statusCode, payload: Buffer.concat(chunks).toString("utf8") }),
          );
        },
      );
      request.on("timeout", () => request.destroy(new Error("timed out")));
      request.on("error", reject);
      if (body !== undefined) request.write(body);
      request.end();
    });
  }

  evaluate(document, { sessionId } = {}) {
    const query = sessionId ? `?session_id=${encodeURIComponent(sessionId)}` : "";
    return this.request("POST", `/v1/evaluate${query}`, document);
  }

  plan(document) {
    return this.request("POST", "/v1/plan", document);
  }

  policy() {
    return this.request("GET", "/v1/policy");
  }

  ready() {
    return this.request("GET", "/readyz");
  }

  session(sessionId) {
    return new Session(this, sessionId);
  }
}

// One session held by the server: the calls of prunewarden's Session, in camelCase.
export class Session {
  constructor(client, sessionId) {
    if (!sessionId || sessionId.includes("/")) {
      throw new TypeError("a session id is not empty and holds no '/'");
    }
    this.client = client;
    this.sessionId = sessionId;
    this.path = `/v1/sessions/${encodeURIComponent(sessionId)}`;
  }

  observeCycle(scores, pinned = [], { cycle } = {}) {
    const body = { scores, pinned };
    if (cycle !== undefined) body.cycle = cycle;
    return this.client.request("POST", `${this.path}/cycles`, body);
  }

  observeTurn(meanRelevance, tokens, { turn } = {}) {
    const body = { mean_relevance: meanRelevance, tokens };
    if (turn !== undefined) body.turn = turn;
    return this.client.request("POST", `${this.path}/turns`, body);
  }

  authorize(segment, score, perturbedScore = null, evictionCandidates = []) {
    return this.client.request("POST", `${this.path}/evictions`, {
      check: "eviction",
      segment,
      score,
      perturbed_score: perturbedScore,
      eviction_candidates: evictionCandidates,
    });
  }

  prune(spans, keepTopK, { turn, tombstones = [], recomputeBudget } = {}) {
    const body = { check: "staleness", spans, keep_top_k: keepTopK, tombstones };
    if (turn !== undefined) body.turn = turn;
    if (recomputeBudget !== undefined) body.recompute_budget = recomputeBudget;
    return this.client.request("POST", `${this.path}/prunes`, body);
  }

  plan(segments, { freeTokens, keepTopK, turn, tombstones = [], recomputeBudget } = {}) {
    const body = { segments, tombstones };
    if (freeTokens !== undefined) body.free_tokens = freeTokens;
    if (keepTopK !== undefined) body.keep_top_k = keepTopK;
    if (turn !== undefined) body.turn = turn;
    if (recomputeBudget !== undefined) body.recompute_budget = recomputeBudget;
    return this.client.request("POST", `${this.path}/plans`, body);
  }

  verify(before, after, { tombstones = [], appliedBy, reported, canaries = [] } = {}) {
    const body = { check: "transition", before, after, tombstones, canaries };
    if (appliedBy !== undefined) body.applied_by = appliedBy;
    if (reported !== undefined) body.reported = reported;
    return this.client.request("POST", `${this.path}/transitions`, body);
  }

  state() {
    return this.client.request("GET", this.path);
  }

  delete() {
    return this.client.request("DELETE", this.path);
  }
}
