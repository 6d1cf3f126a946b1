// Drives one session through a server with @prunewarden/client: healthy cycles, an eviction, a
// collapse, a refused eviction and a refused edit. Prints one line per step.
// Usage: node drive-session.mjs URL [SESSION_ID] (the token, if the server asks one, from
// $PRUNEWARDEN_TOKEN). Install first: npm ci here, after npm ci && npm run build in
// clients/typescript (make typescript does both).

import { Client, SessionConflictError } from "@prunewarden/client";

const [url, sessionId = "node-agent"] = process.argv.slice(2);
if (!url) {
  console.error("usage: node drive-session.mjs URL [SESSION_ID]");
  process.exit(2);
}
const client = new Client(url, { token: process.env.PRUNEWARDEN_TOKEN });
const session = client.session(sessionId);
const segment = { id: "tool-42", kind: "tool_output", tombstone_written: true };
const say = (step, decision) =>
  console.log(
    `${step}: ${decision.check} ${decision.outcome} ${decision.reasons.map((r) => r.code).join(",") || "-"}`,
  );

const cycles = [
  { c: 0.9, a: 0.6, b: 0.1 },
  { c: 0.88, a: 0.55, b: 0.12 },
  { c: 0.3, a: 0.31, b: 0.3 },
  { c: 0.3, a: 0.31, b: 0.3 },
];
try {
  const policy = await client.policy();
  console.log(`policy: ${policy.policy.name}@${policy.policy.version}`);
  say("cycle 1", await session.observeCycle(cycles[0], ["c"]));
  say("cycle 2", await session.observeCycle(cycles[1], ["c"]));
  say("evict tool-42", await session.authorize(segment, 0.1, 0.12));
  say("cycle 3", await session.observeCycle(cycles[2], ["c"]));
  say("cycle 4", await session.observeCycle(cycles[3], ["c"]));
  say("evict tool-42", await session.authorize(segment, 0.1, 0.12));
  const state = await session.state();
  console.log(`state: halted=${state.halted}`);
  try {
    await session.observeCycle(cycles[3], ["c"], { cycle: 1 });
  } catch (error) {
    if (!(error instanceof SessionConflictError)) throw error;
    console.log(`cycle 1 again: HTTP ${error.status} ${error.problems[0].text}`);
  }
  // An edit made by other code, judged from before and after: refused while halted.
  const before = [segment, { id: "tool-43", kind: "tool_output", text: "ok" }];
  say("trim tool-42", await session.verify(before, before.slice(1), { tombstones: ["tool-42"] }));
} catch (error) {
  console.error(`drive-session: ${error.message}`);
  process.exitCode = 1;
} finally {
  await client.close();
}
