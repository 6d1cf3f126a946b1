// The package as it ships: its generated types match the server's OpenAPI document, and the
// tarball `npm pack` builds holds the built modules, their types and the README, and nothing
// else, and its entry point loads.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { PACKAGE } from "./serve.js";

const MODULES = ["client", "errors", "index", "openapi", "transport", "types"];
const PACKED = [
  "package.json",
  "README.md",
  ...MODULES.flatMap((name) => [`dist/${name}.js`, `dist/${name}.d.ts`]),
].sort();

describe("the generated types", () => {
  test("src/openapi.ts is what scripts/generate-types.mjs makes of schemas/ today", async () => {
    const script = pathToFileURL(join(PACKAGE, "scripts", "generate-types.mjs")).href;
    const { generate } = (await import(script)) as { generate: () => Promise<string> };
    const committed = readFileSync(join(PACKAGE, "src", "openapi.ts"), "utf8");
    assert.ok(committed === (await generate()), "src/openapi.ts is out of date: npm run generate");
  });
});

describe("npm pack", () => {
  let scratch: string;
  let packed: { filename: string; name: string; files: { path: string }[] };

  before(() => {
    scratch = mkdtempSync(join(tmpdir(), "prunewarden-pack-"));
    // The package was built by `npm test`'s pretest; --ignore-scripts packs that build.
    const out = execFileSync(
      "npm",
      ["pack", "--json", "--ignore-scripts", "--pack-destination", scratch],
      { cwd: PACKAGE, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
    packed = (JSON.parse(out) as (typeof packed)[])[0] as typeof packed;
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test("the tarball holds the built modules, their types, the README and package.json", () => {
    assert.equal(packed.name, "@prunewarden/client");
    assert.deepEqual(packed.files.map((file) => file.path).sort(), PACKED);
  });

  test("the unpacked tarball's entry point exports the client and its errors", async () => {
    execFileSync("tar", ["-xzf", join(scratch, packed.filename), "-C", scratch]);
    // Its one dependency (undici) from this checkout's install, as npm would place it.
    symlinkSync(join(PACKAGE, "node_modules"), join(scratch, "package", "node_modules"));
    const entry = pathToFileURL(join(scratch, "package", "dist", "index.js")).href;
    const exported = Object.keys((await import(entry)) as object).sort();
    assert.deepEqual(exported, [
      "Client",
      "ConnectionError",
      "InvalidInputError",
      "NotFoundError",
      "ProblemError",
      "PrunewardenError",
      "RequestTimeoutError",
      "RequestTooLargeError",
      "ServiceUnavailableError",
      "Session",
      "SessionConflictError",
      "UnauthorizedError",
      "decisionIds",
    ]);
  });
});
