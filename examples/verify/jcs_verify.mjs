// An auditor's check in another language: recompute prunewarden digests with RFC 8785 (JCS).
//
//   node jcs_verify.mjs digest FILE.json      prints sha256:<hex> of the JSON value in FILE
//   node jcs_verify.mjs digest FILE.json 3    the same of an input document, each span's text
//                                             hashed first (a record's input_digest_version 3)
//   node jcs_verify.mjs chain AUDIT.jsonl     checks each record's hash and prev_hash link
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

function verifyChain(path) {
  // Records of record_version 2 and 3 (a pass as columns) are sealed over JCS; earlier lines are
  // Python's own form and are skipped here (prunewarden audit verify checks them).
  const lines = readFileSync(path, "utf8").split("\n").filter((line) => line.length > 0);
  let previous = null;
  let checked = 0;
  for (const [index, line] of lines.entries()) {
    const record = JSON.parse(line);
    if (record.record_version !== 2 && record.record_version !== 3) {
      previous = record.hash;
      continue;
    }
    const { hash, ...sealed } = record;
    if (previous !== null && sealed.prev_hash !== previous) {
      throw new Error(`line ${index + 1}: prev_hash does not match the line before`);
    }
    if (sha256(canonicalize(sealed)) !== hash) {
      throw new Error(`line ${index + 1}: hash does not match the record`);
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
