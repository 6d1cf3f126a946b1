// The README's TypeScript blocks: npm test's pretest wrote them to test/readme-blocks/
// (scripts/readme-blocks.mjs) and type-checked them against the built package with the tests;
// here the usage block, as compiled, runs against a real server on a unix socket, at its address.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { PACKAGE, serve, type Served } from "./serve.js";

const SOCKET_IN_README = "unix:/run/prunewarden/pdp.sock";
const COMPILED = join(PACKAGE, "build", "test", "readme-blocks", "usage.mjs");

describe("the README's usage block", () => {
  let server: Served;
  let scratch: string;

  before(async () => {
    server = await serve({ unixSocket: true });
    // Inside the package's folder, so that "@prunewarden/client" resolves to the package itself.
    scratch = mkdtempSync(join(PACKAGE, "build", "readme-"));
  });
  after(async () => {
    await server?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("is the README's block as it stands, compiled", () => {
    const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
    const source = readFileSync(join(PACKAGE, "test", "readme-blocks", "usage.mts"), "utf8");
    assert.ok(readme.includes(`\`\`\`ts\n${source}\`\`\``));
    assert.ok(readFileSync(COMPILED, "utf8").includes(SOCKET_IN_README));
  });

  test("runs against a real server: one cycle and one eviction decided and logged", () => {
    const script = join(scratch, "usage.mjs");
    writeFileSync(script, readFileSync(COMPILED, "utf8").replace(SOCKET_IN_README, server.url));
    execFileSync(process.execPath, [script], { stdio: "pipe" });
    const records = readFileSync(join(server.workdir, "audit.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { kind: string; check?: string; outcome?: string });
    assert.deepEqual(
      records
        .filter((record) => record.kind === "decision")
        .map((record) => [record.check, record.outcome]),
      [
        ["collapse", "allow"],
        ["eviction", "allow"],
      ],
    );
  });
});
