// Generates src/openapi.ts from the server's OpenAPI document (schemas/openapi.v1.json).
//
//   node scripts/generate-types.mjs           write src/openapi.ts
//   node scripts/generate-types.mjs --check   exit 1 when the committed file is out of date
//
// The OpenAPI document refers to the bundled JSON Schemas by their $id URLs
// (https://prunewarden.dev/schemas/input.v1.schema.json#/$defs/plan). Those ids are names, not
// addresses to fetch, so the schemas are read from the repository's schemas/ folder and hoisted
// into components.schemas before openapi-typescript sees the document: each schema under its file
// stem ("input.v1"), each of its $defs as "input.v1.plan". A reference to any other place inside a
// schema (decision.v1#/properties/policy) is inlined.

import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const PACKAGE = join(here, "..");
const SCHEMAS = join(PACKAGE, "..", "..", "schemas");
const OUTPUT = join(PACKAGE, "src", "openapi.ts");
const HEADER = `// Generated from schemas/openapi.v1.json and the JSON Schemas it names by
// scripts/generate-types.mjs (npm run generate). Do not edit: a test checks it is up to date.

`;

const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));

function loadSchemas() {
  const byId = new Map();
  for (const file of readdirSync(SCHEMAS).sort()) {
    if (!file.endsWith(".schema.json")) continue;
    const schema = readJson(join(SCHEMAS, file));
    byId.set(schema.$id, { stem: file.slice(0, -".schema.json".length), schema });
  }
  return byId;
}

function pointerGet(document, pointer) {
  let node = document;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (node === undefined || !(key in node)) throw new Error(`no ${pointer} in the schema`);
    node = node[key];
  }
  return node;
}

/** The OpenAPI document with every schema it names hoisted into components.schemas. */
export function bundle() {
  const openapi = readJson(join(SCHEMAS, "openapi.v1.json"));
  const byId = loadSchemas();
  const hoisted = {};

  // A $ref, absolute or relative to the schema `base` ($id) it appears in, as a local reference.
  const localRef = (ref, base) => {
    if (ref.startsWith("#/components/")) return { $ref: ref };
    const [address, fragment = ""] = ref.split("#");
    const id = address === "" ? base : address;
    const entry = byId.get(id);
    if (entry === undefined) throw new Error(`unknown schema ${ref} (in ${base ?? "openapi"})`);
    if (fragment === "") return { $ref: `#/components/schemas/${hoist(entry, "")}` };
    const defs = /^\/\$defs\/([^/]+)$/.exec(fragment);
    if (defs !== null) return { $ref: `#/components/schemas/${hoist(entry, defs[1])}` };
    return rewrite(pointerGet(entry.schema, fragment), id);
  };

  // A schema with its references made local, without the keywords that only name it.
  const rewrite = (node, base) => {
    if (Array.isArray(node)) return node.map((item) => rewrite(item, base));
    if (node === null || typeof node !== "object") return node;
    if (typeof node.$ref === "string") {
      const { $ref, ...rest } = node;
      const target = localRef($ref, base);
      return Object.keys(rest).length === 0 ? target : { allOf: [target], ...rewrite(rest, base) };
    }
    const out = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === "$id" || key === "$schema" || key === "$defs") continue;
      out[key] = rewrite(value, base);
    }
    return out;
  };

  // The components.schemas name of a schema (def "") or of one of its $defs, added once.
  const hoist = (entry, def) => {
    const name = def === "" ? entry.stem : `${entry.stem}.${def}`;
    if (!(name in hoisted)) {
      hoisted[name] = {}; // claimed first: a schema may refer to itself
      const node = def === "" ? entry.schema : entry.schema.$defs[def];
      hoisted[name] = rewrite(node, entry.schema.$id);
    }
    return name;
  };

  const bundled = rewrite(openapi, undefined);
  const ordered = Object.fromEntries(
    Object.entries(hoisted).sort(([a], [b]) => a.localeCompare(b)),
  );
  bundled.components.schemas = { ...bundled.components.schemas, ...ordered };
  return bundled;
}

/** The text src/openapi.ts should hold. */
export async function generate() {
  const ast = await openapiTS(bundle(), {
    alphabetize: false,
    defaultNonNullable: false,
    silent: true,
  });
  return HEADER + astToString(ast);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = await generate();
  if (process.argv.includes("--check")) {
    const committed = readFileSync(OUTPUT, "utf8");
    if (committed !== text) {
      console.error("src/openapi.ts is out of date with schemas/: run npm run generate");
      process.exit(1);
    }
  } else {
    writeFileSync(OUTPUT, text);
  }
}
