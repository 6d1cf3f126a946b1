// An auditor's check in another language: recompute prunewarden digests with RFC 8785 (JCS).
//
//   node jcs_verify.mjs digest FILE.json      prints sha256:<hex> of the JSON value in FILE
//   node jcs_verify.mjs digest FILE.json 3    the same of an input document, each span's text
//                                             hashed first (a record's input_digest_version 3)
//   node jcs_verify.mjs chain AUDIT.jsonl     checks each record's hash and prev_hash link, and
//                                             that each record_version 3 pass says one thing
//
// Written against the RFC alone, with no package: keys in UTF-16 order (JavaScript's own string
// order), numbers and strings as JSON.stringify writes them. Exit 0 when everything verifies.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

export function canonicalize(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "[" + value.map(canonicalize).join(",") + "]";
  }
  const keys = Object.keys(value).sort();
  return "{" + keys.map((key) => JSON.stringify(key) + ":" + canonicalize(value[key])).join(",") + "}";
}

function sha256(text) {
  return "sha256:" + createHash("sha256").update(text, "utf8").digest("hex");
}

// Input digest version 3: the text of each item of the document's spans (or window segments)
// replaced by {"sha256": lower-case hex SHA-256 of its UTF-8 bytes}, then digested as above.
export function hashTexts(document) {
  const hashed = { ...document };
  for (const key of ["spans", "segments"]) {
    if (Array.isArray(document[key])) {
      hashed[key] = document[key].map((item) =>
        typeof item.text === "string"
          ? { ...item, text: { sha256: createHash("sha256").update(item.text, "utf8").digest("hex") } }
          : item,
      );
    }
  }
  return hashed;
}

// A record_version 3 pass record: its columns agree with each other and with the code table of
// the guard that wrote them, as prunewarden audit verify checks them (prunewarden.audit.
// _columns_check): the code table and its actions, parallel columns, masks within the table, an
// allowed segment exactly one whose only reason is the allowing code, the dependencies of
// exactly the segments that ask for them, and a plan's verdict places and evictions.
const EVICTION_CODES = ["authorized", "pinned", "unscoreable", "perturbation_missing", "unstable_score", "no_tombstone"];
const TABLES = [
  { codes: EVICTION_CODES, actions: [null, "pin", "resolve_dependencies_first", "rescore", "rescore", "write_tombstone"], allowing: 1 },
  { codes: ["audit_unavailable"], actions: [null], allowing: 0 },
];
const strings = (value) => Array.isArray(value) && value.every((item) => typeof item === "string");
const integer = (value) => Number.isInteger(value);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

export function columnsProblem(record) {
  const { segments, codes, reasons: masks, allowed } = record;
  if (!strings(segments) || !strings(codes)) return "segments and codes must be lists of strings";
  if (!Array.isArray(masks) || !masks.every(integer)) return "reasons must be a list of integer masks";
  if (typeof allowed !== "string" || !/^[01]*$/.test(allowed)) return "allowed must be a string of 0 and 1";
  if (record.check !== "eviction" || !["deny", "halt"].includes(record.refusal)) {
    return "check must be eviction and refusal deny or halt";
  }
  const table = TABLES.find((t) => same(t.codes, codes));
  if (table === undefined) {
    const sorted = (list) => JSON.stringify([...list].sort());
    const known = TABLES.find((t) => sorted(t.codes) === sorted(codes));
    return known ? `codes out of table order: ${JSON.stringify(codes)}` : `codes ${JSON.stringify(codes)} are no code table this verifier knows`;
  }
  if (!same(record.code_actions, table.actions)) return "code_actions are not the actions of the code table";
  if (!(segments.length === masks.length && masks.length === allowed.length)) {
    return `${segments.length} segments, ${masks.length} reason masks and ${allowed.length} outcomes: the columns disagree`;
  }
  if (new Set(segments).size < segments.length) return "a segment is decided twice";
  const asking = new Set();
  for (const [index, mask] of masks.entries()) {
    const where = `segment ${index} (${JSON.stringify(segments[index])})`;
    if (mask <= 0) return `${where} has no reason (mask ${mask})`;
    if (mask >= 2 ** codes.length) return `${where}: mask ${mask} has bits past the code table of ${codes.length} codes`;
    const bits = codes.map((_, bit) => Math.floor(mask / 2 ** bit) % 2 === 1);
    if (allowed[index] === "1" && mask !== table.allowing) return `${where} is allowed yet it has refusing reasons`;
    if (allowed[index] === "0" && table.allowing !== 0 && bits[Math.log2(table.allowing)]) {
      return `${where} is refused yet its reasons include the allowing code`;
    }
    if (bits.some((on, bit) => on && table.actions[bit] === "resolve_dependencies_first")) asking.add(index);
  }
  const dependencies = record.dependencies;
  if (dependencies === null || typeof dependencies !== "object" || Array.isArray(dependencies)) {
    return "dependencies must be an object";
  }
  const named = new Set();
  for (const [key, ids] of Object.entries(dependencies)) {
    if (!/^(0|[1-9][0-9]*)$/.test(key) || Number(key) >= segments.length) {
      return `dependencies name segment ${JSON.stringify(key)}, not one of the ${segments.length} segments`;
    }
    if (!strings(ids)) return `dependencies of segment ${key} must be a list of ids`;
    named.add(Number(key));
  }
  if (named.size !== asking.size || [...named].some((index) => !asking.has(index))) {
    return "dependencies do not name exactly the segments whose reasons ask to resolve them first";
  }
  if (!("verdicts" in record) && !("verdict_indices" in record)) return null;
  if (record.pass !== "plan") return "verdicts and verdict_indices belong to a plan";
  const { verdicts, verdict_indices: places } = record;
  if (!Array.isArray(verdicts) || !Array.isArray(places)) return "a plan's verdicts and verdict_indices must be lists";
  if (verdicts.length !== places.length) return `${verdicts.length} verdicts and ${places.length} verdict_indices: they disagree`;
  const total = segments.length + verdicts.length;
  if (!places.every((p) => integer(p) && p >= 0 && p < total) || new Set(places).size < places.length) {
    return `verdict_indices are not distinct places of a pass of ${total} decisions`;
  }
  const granted = new Set(segments.filter((_, index) => allowed[index] === "1"));
  for (const verdict of verdicts) {
    if (verdict && verdict.check === "eviction" && verdict.outcome === "allow") granted.add(String(verdict.segment));
  }
  const evicted = record.plan && typeof record.plan === "object" ? (record.plan.evict ?? []) : [];
  if (!strings(evicted)) return "the plan's evict must be a list of ids";
  const refused = evicted.filter((id) => !granted.has(id));
  return refused.length ? `the plan evicts ${JSON.stringify(refused)}, which the pass did not allow` : null;
}

function verifyChain(path) {
  // Every record is sealed over JCS: record_version 3 for a pass as columns, 2 for the others.
  // Any other version (1 was written before the first release) is refused, as audit verify does.
  const lines = readFileSync(path, "utf8").split("\n").filter((line) => line.length > 0);
  let previous = null;
  let checked = 0;
  for (const [index, line] of lines.entries()) {
    const record = JSON.parse(line);
    if (record.record_version !== 2 && record.record_version !== 3) {
      throw new Error(`line ${index + 1}: record_version ${JSON.stringify(record.record_version)} is not read (only 2 and 3)`);
    }
    const { hash, ...sealed } = record;
    if (previous !== null && sealed.prev_hash !== previous) {
      throw new Error(`line ${index + 1}: prev_hash does not match the line before`);
    }
    if (sha256(canonicalize(sealed)) !== hash) {
      throw new Error(`line ${index + 1}: hash does not match the record`);
    }
    if (record.record_version === 3 && record.kind === "pass") {
      const problem = columnsProblem(record);
      if (problem !== null) {
        throw new Error(`line ${index + 1}: pass ${JSON.stringify(record.pass_id)} contradicts itself: ${problem}`);
      }
    }
    previous = hash;
    checked += 1;
  }
  return checked;
}

const [command, path, version] = process.argv.slice(2);
if (command === "digest") {
  const value = JSON.parse(readFileSync(path, "utf8"));
  console.log(sha256(canonicalize(version === "3" ? hashTexts(value) : value)));
} else if (command === "chain") {
  try {
    console.log(`ok ${verifyChain(path)} records`);
  } catch (error) {
    console.log(`FAIL ${error.message}`);
    process.exit(1);
  }
} else {
  console.error("usage: node jcs_verify.mjs digest FILE.json [3] | chain AUDIT.jsonl");
  process.exit(2);
}
