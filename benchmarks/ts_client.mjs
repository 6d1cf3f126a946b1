// The Node side of benchmarks/ts_client.py: sequential evictions against one server through
// @prunewarden/client, through a plain node:http keep-alive client, and through Node's global
// fetch, in turns within each repeat. Prints one JSON document: the latencies' p50 of every
// client in every repeat, in milliseconds.
//
//   node benchmarks/ts_client.mjs URL REQUESTS REPEATS WARMUP

import http from "node:http";
import { performance } from "node:perf_hooks";
import { Agent, fetch as undiciFetch } from "../clients/typescript/node_modules/undici/index.js";
import { Client } from "../clients/typescript/dist/index.js";

const [url, requests, repeats, warmup] = [
  process.argv[2],
  Number(process.argv[3]),
  Number(process.argv[4]),
  Number(process.argv[5]),
];
const SEGMENT = { id: "tool-42", kind: "tool_output", tombstone_written: true };
const BODY = JSON.stringify({
  check: "eviction",
  segment: SEGMENT,
  score: 0.1,
  perturbed_score: 0.12,
});

// The package, as a caller uses it.
function viaPackage() {
  const client = new Client(url);
  return {
    call: (session) => client.session(session).authorize(SEGMENT, 0.1, 0.12),
    close: () => client.close(),
  };
}

// The lightest client Node has: one kept-alive socket, the body read and parsed.
function viaNodeHttp() {
  const { hostname, port } = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { "content-type": "application/json", accept: "application/json" };
  const call = (session) =>
    new Promise((resolve, reject) => {
      const request = http.request(
        {
          host: hostname,
          port,
          agent,
          method: "POST",
          path: `/v1/sessions/${session}/evictions`,
          headers,
        },
        (response) => {
          const chunks = [];
          response.on("data", (chunk) => chunks.push(chunk));
          response.on("end", () => {
            if (response.statusCode !== 200) reject(new Error(`HTTP ${response.statusCode}`));
            else resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
          });
        },
      );
      request.on("error", reject);
      request.end(BODY);
    });
  return { call, close: () => agent.destroy() };
}

// Node's global fetch (its own keep-alive pool): how the example client called before.
function viaGlobalFetch() {
  const headers = { "content-type": "application/json", accept: "application/json" };
  const call = async (session) => {
    const response = await fetch(`${url}/v1/sessions/${session}/evictions`, {
      method: "POST",
      headers,
      body: BODY,
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    return JSON.parse(await response.text());
  };
  return { call, close: () => undefined };
}

// undici's own fetch over a keep-alive Agent: what the package would cost were it built on fetch.
function viaUndiciFetch() {
  const dispatcher = new Agent({ keepAliveTimeout: 4000 });
  const headers = { "content-type": "application/json", accept: "application/json" };
  const call = async (session) => {
    const response = await undiciFetch(`${url}/v1/sessions/${session}/evictions`, {
      method: "POST",
      headers,
      body: BODY,
      dispatcher,
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    return JSON.parse(await response.text());
  };
  return { call, close: () => dispatcher.close() };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

async function p50(client, session) {
  for (let i = 0; i < warmup; i += 1) await client.call(session);
  const latencies = [];
  for (let i = 0; i < requests; i += 1) {
    const began = performance.now();
    const decision = await client.call(session);
    latencies.push(performance.now() - began);
    if (decision.outcome !== "allow") throw new Error(`unexpected ${decision.outcome}`);
  }
  return median(latencies);
}

const clients = {
  package: viaPackage(),
  node_http: viaNodeHttp(),
  undici_fetch: viaUndiciFetch(),
  fetch: viaGlobalFetch(),
};
const names = Object.keys(clients);
const results = Object.fromEntries(names.map((name) => [name, []]));
for (let repeat = 0; repeat < repeats; repeat += 1) {
  // Each repeat runs the clients in another order, so none always runs first on a warming server.
  const order = names.map((_, i) => names[(i + repeat) % names.length]);
  for (const name of order) results[name].push(await p50(clients[name], `${name}-${repeat}`));
}
await Promise.all(Object.values(clients).map((client) => client.close()));
console.log(JSON.stringify(results));
