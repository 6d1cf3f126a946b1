// The client against a real `prunewarden serve`: over loopback TCP with a token, over a unix
// socket, and with the server's problem documents as typed errors.

import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  Client,
  InvalidInputError,
  NotFoundError,
  RequestTooLargeError,
  ServiceUnavailableError,
  SessionConflictError,
  UnauthorizedError,
  decisionIds,
  type Segment,
} from "../src/index.js";
import { serve, type Served } from "./serve.js";

const TOKEN = "ts-client-token";
const SEGMENT: Segment = { id: "tool-42", kind: "tool_output", tombstone_written: true };
const HEALTHY = { c: 0.9, a: 0.6, b: 0.1 };
const FLAT = { c: 0.3, a: 0.31, b: 0.3 };

/**
 * How many connections the client's agent opened. Sequential calls share at most two: undici
 * frees a connection a tick after its answer's body has ended, so the next call, sent at once,
 * may open a second one; from then on the two are reused.
 */
function countConnections(client: Client): () => number {
  let opened = 0;
  client.transport["agent"].on("connect", () => (opened += 1));
  return () => opened;
}

describe("over loopback TCP with a token", () => {
  let server: Served;
  let client: Client;

  before(async () => {
    server = await serve({ token: TOKEN });
    client = new Client(server.url, { token: TOKEN });
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test("reads the policy in force and the probes", async () => {
    const policy = await client.policy();
    assert.deepEqual([policy.policy.name, policy.policy.version], ["default", "1.0.0"]);
    assert.match(policy.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal((await client.health()).status, "ok");
    assert.equal((await client.ready()).policy.name, "default");
  });

  test("drives a session to a halt: allow, halt, pruning_halted, then a 409 for an old cycle", async () => {
    const session = client.session("ts-halt");
    assert.equal((await session.observeCycle(HEALTHY, ["c"])).outcome, "allow");
    const allowed = await session.authorize(SEGMENT, 0.1, 0.12);
    assert.deepEqual(
      [allowed.check, allowed.outcome, allowed.reasons.map((r) => r.code)],
      ["eviction", "allow", ["authorized"]],
    );
    await session.observeCycle(FLAT, ["c"]);
    const halted = await session.observeCycle(FLAT, ["c"]);
    assert.deepEqual([halted.check, halted.outcome], ["collapse", "halt"]);
    const refused = await session.authorize(SEGMENT, 0.1, 0.12);
    assert.deepEqual([refused.outcome, refused.reasons[0]?.code], ["deny", "pruning_halted"]);
    assert.equal((await session.state()).halted, true);
    const conflict = await session.observeCycle(FLAT, ["c"], { cycle: 1 }).catch((e: unknown) => e);
    assert.ok(conflict instanceof SessionConflictError);
    assert.deepEqual(
      [conflict.status, conflict.kind, conflict.attempts],
      [409, "session-conflict", 1],
    );
    assert.match(conflict.problems[0]?.text ?? "", /^<request>:1:\d+: /);
    const deleted = await session.delete();
    assert.deepEqual([deleted.session_id, deleted.deleted], ["ts-halt", true]);
    const gone = await session.state().catch((e: unknown) => e);
    assert.ok(gone instanceof NotFoundError);
    assert.deepEqual([gone.status, gone.kind], [404, "not-found"]);
  });

  test("judges an edit made by other code, and reads every decision id of a plan", async () => {
    const session = client.session("ts-edit");
    const before = [SEGMENT, { id: "tool-43", kind: "tool_output", text: "ok" }];
    const trimmed = await session.verify(before, before.slice(1), { tombstones: ["tool-42"] });
    assert.equal(trimmed.check, "transition");
    assert.deepEqual(decisionIds(trimmed), [trimmed.decision_id]);
    // Scores not bound to a text hash: the pass is frozen by one staleness decision.
    const segments = ["s1", "s2", "s3"].map((id, i) => ({
      id,
      kind: "tool_output",
      score: 0.1 * (i + 1),
      perturbed_score: 0.1 * (i + 1),
      tombstone_written: true,
      tokens: 10,
    }));
    const plan = await client.plan({ segments, keep_top_k: 1 });
    assert.deepEqual([plan.frozen, plan.evict, plan.recompute], [true, [], ["s1", "s2", "s3"]]);
    assert.deepEqual(
      plan.decisions.map((d) => d.reasons[0]?.code),
      ["unbound_score"],
    );
    assert.deepEqual(decisionIds(plan), [plan.decisions[0]?.decision_id]);
  });

  test("an invalid document is an InvalidInputError locating each problem", async () => {
    const session = client.session("ts-invalid");
    const error = await session
      .authorize(SEGMENT, "high" as unknown as number)
      .catch((e: unknown) => e);
    assert.ok(error instanceof InvalidInputError);
    assert.deepEqual([error.status, error.kind], [400, "invalid-input"]);
    assert.deepEqual(
      error.problems.map((p) => [p.file, p.path]),
      [["<request>", "$.score"]],
    );
  });

  test("keeps its connections alive across sequential calls", async () => {
    const keepAlive = new Client(server.url, { token: TOKEN });
    const opened = countConnections(keepAlive);
    const session = keepAlive.session("ts-keep-alive");
    for (let i = 0; i < 20; i += 1) await session.authorize(SEGMENT, 0.1, 0.12);
    await keepAlive.close();
    assert.ok(opened() >= 1 && opened() <= 2, `${opened()} connections for 20 calls`);
  });

  test("without the token every data route is an UnauthorizedError, the probes answer", async () => {
    const anonymous = new Client(server.url, { retry: { attempts: 1 } });
    try {
      const error = await anonymous.policy().catch((e: unknown) => e);
      assert.ok(error instanceof UnauthorizedError);
      assert.deepEqual([error.status, error.kind], [401, "unauthorized"]);
      assert.equal((await anonymous.health()).status, "ok");
    } finally {
      await anonymous.close();
    }
  });
});

describe("over a unix socket", () => {
  let server: Served;
  let client: Client;

  before(async () => {
    server = await serve({ unixSocket: true });
    client = new Client(server.url);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test("reaches the same API through the socket on kept connections", async () => {
    assert.match(server.url, /^unix:\/.*pdp\.sock$/);
    const opened = countConnections(client);
    const session = client.session("ts-unix");
    await session.observeCycle(HEALTHY, ["c"]);
    const decision = await session.authorize(SEGMENT, 0.1, 0.12);
    assert.deepEqual([decision.outcome, decision.policy.name], ["allow", "default"]);
    const turn = await session.observeTurn(0.5, 100);
    assert.deepEqual([turn.session_id, turn.halted], ["ts-unix", false]);
    for (let i = 0; i < 10; i += 1) await session.authorize(SEGMENT, 0.1, 0.12);
    assert.ok(opened() >= 1 && opened() <= 2, `${opened()} connections for 13 calls`);
  });
});

describe("the server's limits as typed errors", () => {
  let server: Served;

  before(async () => {
    server = await serve({ args: ["--max-connections", "1", "--max-request-bytes", "2048"] });
  });
  after(async () => server?.stop());

  test("a body over --max-request-bytes is a RequestTooLargeError naming the limit", async () => {
    const client = new Client(server.url);
    try {
      const text = "x".repeat(4096);
      const error = await client
        .session("ts-large")
        .authorize({ ...SEGMENT, text }, 0.1, 0.12)
        .catch((e: unknown) => e);
      assert.ok(error instanceof RequestTooLargeError);
      assert.deepEqual(
        [error.status, error.kind, error.problem.limit],
        [413, "request-too-large", 2048],
      );
    } finally {
      await client.close();
    }
  });

  test("a server at its connection cap answers a ServiceUnavailableError naming the limit", async () => {
    const held = await hold(server.url);
    const client = new Client(server.url, { retry: { attempts: 1 } });
    try {
      const error = await client.policy().catch((e: unknown) => e);
      assert.ok(error instanceof ServiceUnavailableError);
      assert.deepEqual(
        [error.status, error.kind, error.problem.limit],
        [503, "server-busy", "connections"],
      );
    } finally {
      held.destroy();
      await client.close();
    }
  });
});

/**
 * A connection that holds the server's one place (--max-connections 1) until destroyed. The
 * server frees a place once it has seen an earlier connection close (the readiness probe's, the
 * previous test's), so until then a new one is answered 503 and closed: poll, as for readiness.
 */
async function hold(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const socket = connect({ host: hostname, port: Number(port) });
    await new Promise<void>((done, fail) => socket.once("connect", done).once("error", fail));
    socket.write(`GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
    const head = await new Promise<string>((done) =>
      socket.once("data", (chunk) => done(String(chunk))),
    );
    if (head.startsWith("HTTP/1.1 200")) return socket;
    socket.destroy();
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error("the server never freed its one connection");
}
