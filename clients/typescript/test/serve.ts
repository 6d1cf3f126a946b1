// A real `prunewarden serve` in a subprocess, for the tests: on a loopback port the kernel picks
// (the server prints its address) or on a unix socket; ready once /readyz answers 200, polled
// until a bounded deadline; always stopped (SIGTERM, then SIGKILL) by whoever started it.
//
// The command is $PRUNEWARDEN (make sets it to the project's .venv), else the checkout's
// .venv/bin/prunewarden.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The package's folder (tests run compiled, from build/test/). */
export const PACKAGE = resolve(here, "..", "..");
export const ROOT = resolve(PACKAGE, "..", "..");
export const POLICY = join(ROOT, "policies", "default.yaml");
const COMMAND = process.env.PRUNEWARDEN ?? join(ROOT, ".venv", "bin", "prunewarden");
const STARTUP_MS = 60_000; // generous: a loaded 2-core machine imports slowly
const STOP_MS = 30_000;

export interface Served {
  /** `http://127.0.0.1:PORT` or `unix:/path.sock`. */
  url: string;
  workdir: string;
  /** What the server printed so far. */
  output: () => string;
  stop: () => Promise<void>;
}

export interface ServeOptions {
  unixSocket?: boolean;
  token?: string;
  /** A tenants file, served with `--tenants` instead of the default policy. */
  tenants?: string;
  args?: string[];
}

export async function serve(options: ServeOptions = {}): Promise<Served> {
  if (!existsSync(COMMAND)) {
    throw new Error(`${COMMAND} not found: create the .venv (make) or set $PRUNEWARDEN`);
  }
  const workdir = mkdtempSync(join(tmpdir(), "prunewarden-ts-"));
  const listen = options.unixSocket ? `unix:${join(workdir, "pdp.sock")}` : "127.0.0.1:0";
  const env = { ...process.env };
  delete env.PRUNEWARDEN_TOKEN;
  if (options.token !== undefined) env.PRUNEWARDEN_TOKEN = options.token;
  const child = spawn(
    COMMAND,
    [
      "serve",
      ...(options.tenants === undefined ? ["--policy", POLICY] : ["--tenants", options.tenants]),
      "--audit-log",
      join(workdir, "audit.jsonl"),
      "--listen",
      listen,
      "--reload-interval",
      "0",
      ...(options.args ?? []),
    ],
    { cwd: workdir, env, stdio: "pipe" },
  );
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const stop = async (): Promise<void> => {
    await terminate(child);
    rmSync(workdir, { recursive: true, force: true });
  };
  try {
    const url = await address(child, () => output);
    await ready(url, child);
    return { url, workdir, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function address(child: ChildProcessWithoutNullStreams, output: () => string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(
      () => finish(new Error(`the server did not start:\n${output()}`)),
      STARTUP_MS,
    );
    const onData = (): void => {
      const found = /listening on (\S+)/.exec(output());
      if (found?.[1] !== undefined) finish(undefined, found[1]);
    };
    const onExit = (): void => finish(new Error(`the server exited:\n${output()}`));
    const finish = (error?: Error, url?: string): void => {
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.stderr.off("data", onData);
      child.off("exit", onExit);
      if (url === undefined) reject(error);
      else resolvePromise(url);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", onExit);
    onData();
  });
}

async function ready(url: string, child: ChildProcessWithoutNullStreams): Promise<void> {
  const deadline = Date.now() + STARTUP_MS;
  while (Date.now() < deadline && child.exitCode === null) {
    if ((await readyzStatus(url)) === 200) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error("the server never became ready");
}

/** GET /readyz over a fresh connection (node:http, so the helper does not rest on the package). */
function readyzStatus(url: string): Promise<number> {
  const target = url.startsWith("unix:")
    ? { socketPath: url.slice("unix:".length), path: "/readyz" }
    : { host: new URL(url).hostname, port: Number(new URL(url).port), path: "/readyz" };
  return new Promise((done) => {
    const call = request({ ...target, agent: false, timeout: 5000 }, (response) => {
      response.resume();
      response.on("end", () => done(response.statusCode ?? 0));
    });
    call.on("timeout", () => call.destroy());
    call.on("error", () => done(0));
    call.end();
  });
}

async function terminate(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_MS);
  await exited;
  clearTimeout(timer);
}
