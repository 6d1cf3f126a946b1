// Writes the README's TypeScript blocks to test/readme-blocks/ (not committed), so that the test
// build (tsc -p tsconfig.test.json, npm test's pretest) type-checks them against the built
// package, and test/readme.test.ts runs the usage block. The error-handling block is a fragment:
// it is given what it takes from the usage block.

import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(PACKAGE, "test", "readme-blocks");
const FRAGMENT_PRELUDE = `import { Client, SessionConflictError } from "@prunewarden/client";
const session = new Client("http://127.0.0.1:8181").session("agent-7");
const scores = { c: 0.3 };
const pinned = ["c"];
`;

const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((found) => found[1]);
if (blocks.length !== 2) throw new Error(`README.md: ${blocks.length} ts blocks, 2 expected`);
rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
writeFileSync(join(OUT, "usage.mts"), blocks[0]);
writeFileSync(join(OUT, "errors.mts"), `${FRAGMENT_PRELUDE}${blocks[1]}export {};\n`);
