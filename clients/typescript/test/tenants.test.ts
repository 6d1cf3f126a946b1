// The client against a real `prunewarden serve --tenants`: its `labels` choose the tenant of
// every call (sent as Prunewarden-Labels), and `policies()` lists the tenants.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client, SessionConflictError, type EvictionDocument } from "../src/index.js";
import { ROOT, serve, type Served } from "./serve.js";

const DEPLOYMENTS = join(ROOT, "examples", "deployments");
const TENANTS = `tenantsVersion: 1
default: staging
tenants:
  - name: prod-eu
    selector: {matchLabels: {deployment: prod-eu}}
    policy: ${join(DEPLOYMENTS, "prod-eu.yaml")}
  - name: staging
    selector: {matchLabels: {deployment: staging}}
    policy: ${join(DEPLOYMENTS, "staging.yaml")}
`;
const EVICTION: EvictionDocument = {
  check: "eviction",
  segment: { id: "turn-30", kind: "turn", tombstone_written: true, tokens: 240 },
  score: 0.08,
  perturbed_score: 0.1,
  eviction_candidates: ["turn-30"],
};

describe("on a server of two tenants", () => {
  let folder: string;
  let server: Served;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), "prunewarden-ts-tenants-"));
    const tenants = join(folder, "tenants.yaml");
    writeFileSync(tenants, TENANTS);
    server = await serve({ tenants });
  });
  after(async () => {
    await server?.stop();
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  });

  test("labels choose the tenant of every call; none, the default", async () => {
    const prod = new Client(server.url, { labels: { deployment: "prod-eu", team: "search" } });
    const plain = new Client(server.url);
    try {
      const chosen = await prod.evaluate(EVICTION);
      const policy = await prod.policy();
      const fallback = await plain.evaluate(EVICTION);
      assert.deepEqual(
        [chosen.policy.name, policy.policy.name, policy.tenant, fallback.policy.name],
        ["prod-eu", "prod-eu", "prod-eu", "staging"],
      );
    } finally {
      await prod.close();
      await plain.close();
    }
  });

  test("a session opened under one tenant is refused under another: tenant-conflict", async () => {
    const prod = new Client(server.url, { labels: { deployment: "prod-eu" } });
    const staging = new Client(server.url, { labels: { deployment: "staging" } });
    try {
      const opened = await prod.session("ts-tenant").observeCycle({ a: 0.9, b: 0.2 }, ["a"]);
      assert.equal(opened.policy.name, "prod-eu");
      const refused = await staging
        .session("ts-tenant")
        .observeCycle({ a: 0.9, b: 0.2 }, ["a"])
        .catch((e: unknown) => e);
      assert.ok(refused instanceof SessionConflictError);
      assert.deepEqual([refused.status, refused.kind], [409, "tenant-conflict"]);
    } finally {
      await prod.close();
      await staging.close();
    }
  });

  test("policies() lists each tenant in order, its selector, policy and health", async () => {
    const client = new Client(server.url);
    try {
      const listed = await client.policies();
      assert.equal(listed.default, "staging");
      assert.deepEqual(
        listed.tenants.map((t) => [
          t.name,
          t.default,
          t.selector.matchLabels,
          t.policy.name,
          t.healthy,
        ]),
        [
          ["prod-eu", false, { deployment: "prod-eu" }, "prod-eu", true],
          ["staging", true, { deployment: "staging" }, "staging", true],
        ],
      );
    } finally {
      await client.close();
    }
  });

  test("a label the header cannot carry is a TypeError before any call", () => {
    assert.throws(
      () => new Client(server.url, { labels: { team: "search,infra" } }),
      /holds no ','/,
    );
    assert.throws(() => new Client(server.url, { labels: { "a=b": "c" } }), /holds no '='/);
  });
});
