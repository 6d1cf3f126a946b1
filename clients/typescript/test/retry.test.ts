// The retry rules, against a scripted HTTP server on loopback that answers each request as told
// (a real server cannot be made to fail on cue): which calls are repeated, after which failures,
// and how many times.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { Client, ConnectionError, ServiceUnavailableError } from "../src/index.js";

type Reply = "ok" | "busy" | "audit" | "reset";

const PROBLEMS = "https://prunewarden.dev/problems/";
const SEGMENT = { id: "tool-42", kind: "tool_output", tombstone_written: true };
const RETRY = { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 };

/** Answers the n-th request with script[n] (the last entry once the script runs out). */
class Scripted {
  readonly server: Server;
  script: Reply[] = ["ok"];
  seen: string[] = [];

  constructor() {
    this.server = createServer((request, response) => this.answer(request, response));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private answer(request: IncomingMessage, response: ServerResponse): void {
    const reply = this.script[Math.min(this.seen.length, this.script.length - 1)];
    this.seen.push(`${request.method} ${request.url}`);
    request.resume();
    if (reply === "reset") {
      request.socket.destroy();
      return;
    }
    if (reply === "ok") {
      response.writeHead(200, { "content-type": "application/json" }).end('{"status": "ok"}');
      return;
    }
    const kind = reply === "busy" ? "server-busy" : "audit-unavailable";
    const problem = { type: PROBLEMS + kind, title: kind, status: 503, detail: kind };
    response
      .writeHead(503, { "content-type": "application/problem+json" })
      .end(JSON.stringify(problem));
  }
}

describe("retries", () => {
  const scripted = new Scripted();
  let client: Client;

  before(async () => {
    await new Promise<void>((done) => scripted.server.listen(0, "127.0.0.1", done));
    client = new Client(scripted.url, { retry: RETRY });
  });
  after(async () => {
    await client.close();
    await new Promise((done) => scripted.server.close(done));
  });
  beforeEach(() => {
    scripted.seen = [];
  });

  test("an idempotent call is repeated after a 503 until it is answered", async () => {
    scripted.script = ["audit", "audit", "ok"];
    assert.deepEqual(await client.health(), { status: "ok" });
    assert.deepEqual(scripted.seen, ["GET /healthz", "GET /healthz", "GET /healthz"]);
  });

  test("an idempotent call gives up after its attempts with the last problem", async () => {
    scripted.script = ["audit"];
    const error = await client.evaluate({} as never).catch((e: unknown) => e);
    assert.ok(error instanceof ServiceUnavailableError);
    assert.deepEqual([error.kind, error.attempts], ["audit-unavailable", 3]);
    assert.equal(scripted.seen.length, 3);
  });

  test("an idempotent call is repeated after the connection broke", async () => {
    scripted.script = ["reset", "ok"];
    await client.policy();
    assert.deepEqual(scripted.seen, ["GET /v1/policy", "GET /v1/policy"]);
  });

  test("a session change is not repeated after a 503 the server may have decided", async () => {
    scripted.script = ["audit", "ok"];
    const error = await client
      .session("s")
      .authorize(SEGMENT, 0.1)
      .catch((e: unknown) => e);
    assert.ok(error instanceof ServiceUnavailableError);
    assert.deepEqual([error.kind, error.attempts], ["audit-unavailable", 1]);
    assert.deepEqual(scripted.seen, ["POST /v1/sessions/s/evictions"]);
  });

  test("a session change is not repeated after the connection broke mid-call", async () => {
    scripted.script = ["reset", "ok"];
    const error = await client
      .session("s")
      .observeCycle({ a: 0.5 })
      .catch((e: unknown) => e);
    assert.ok(error instanceof ConnectionError);
    assert.equal(error.attempts, 1);
    assert.equal(scripted.seen.length, 1);
  });

  test("a session change is repeated after server-busy: the server read nothing of it", async () => {
    scripted.script = ["busy", "ok"];
    await client.session("s").observeTurn(0.5, 10);
    assert.deepEqual(scripted.seen, ["POST /v1/sessions/s/turns", "POST /v1/sessions/s/turns"]);
  });

  test("attempts: 1 never repeats", async () => {
    scripted.script = ["audit", "ok"];
    const once = new Client(scripted.url, { retry: { attempts: 1 } });
    try {
      const error = await once.health().catch((e: unknown) => e);
      assert.ok(error instanceof ServiceUnavailableError);
      assert.equal(scripted.seen.length, 1);
    } finally {
      await once.close();
    }
  });
});

describe("an unreachable server", () => {
  test("a refused connection is tried again for any call, then a ConnectionError", async () => {
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const { port } = closed.address() as AddressInfo;
    await new Promise((done) => closed.close(done));
    const client = new Client(`http://127.0.0.1:${port}`, { retry: RETRY });
    try {
      const error = await client
        .session("s")
        .authorize(SEGMENT, 0.1)
        .catch((e: unknown) => e);
      assert.ok(error instanceof ConnectionError);
      assert.deepEqual([error.code, error.attempts], ["ECONNREFUSED", 3]);
    } finally {
      await client.close();
    }
  });

  test("a unix socket that does not exist is a ConnectionError naming ENOENT", async () => {
    const client = new Client("unix:/nonexistent/prunewarden.sock", { retry: RETRY });
    try {
      const error = await client.health().catch((e: unknown) => e);
      assert.ok(error instanceof ConnectionError);
      assert.deepEqual([error.code, error.attempts], ["ENOENT", 3]);
    } finally {
      await client.close();
    }
  });

  test("an address that is neither http(s) nor unix: is refused at construction", () => {
    assert.throws(() => new Client("ftp://127.0.0.1"), TypeError);
    assert.throws(() => new Client("unix:"), TypeError);
  });
});
