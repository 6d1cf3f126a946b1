"""A fleet of two decision points on one signed policy bundle, served over HTTP on loopback.

The story of docs/fleet.md, run end to end with the real commands: a key pair, a bundle of the
deployments' policies (``examples/deployments/``: prod-eu with its candidate as shadow, and
staging) built and signed; a bundle server and a ``prunewarden audit collect`` on loopback; two
``prunewarden serve --bundle URL --tenants examples/fleet/tenants.yaml --ship URL`` servers of
two tenants each; on each, decisions for both tenants (prod-eu's labels in the
``Prunewarden-Labels`` header, staging's in the document); ``prunewarden status`` of both; then
a tampered bundle published, refused by both servers with the last good bundle kept (their
``/readyz`` detail and the one ``policy_reload_failed`` record each writes); every record
shipped; the servers stopped and ``prunewarden audit verify`` run on each server's log and on
each replica's file the collector wrote. ``make demo`` runs it after examples/demo.sh.

What it saw goes to ``OUTPUT_DIR/summary.json`` (tests/server/test_fleet_demo.py reads it); the
story goes to standard output.

    python examples/fleet/fleet_demo.py OUTPUT_DIR
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deployments"
INPUTS = ROOT / "examples" / "inputs"
PRUNEWARDEN = shutil.which("prunewarden") or str(Path(sys.executable).with_name("prunewarden"))
REVISION = "fleet-1"
BUILT_AT = "2026-12-01T00:00:00Z"  # fixed: the same bundle bytes at every run
TAMPERED = "prod-eu.yaml"  # the file changed in the published copy, after signing
SERVERS = 2
PATIENCE = 60.0  # seconds a server may take to start, or to see a new bundle
POLL = "0.2"  # seconds between two fetches of the bundle by each server
_LISTENING = re.compile(r"listening on (\S+)")
_COLLECTING = re.compile(r"listening on (http://[^\s,]+)")
TENANTS = Path(__file__).resolve().with_name("tenants.yaml")
LABELS_HEADER = "Prunewarden-Labels"


# --- the tenants and the shipping -------------------------------------------------------------


@dataclass(frozen=True)
class TenantRequest:
    """One decision sent to a server: the input file of examples/inputs/, the tenant it is
    meant for, and how its labels travel (the header, or the document's ``labels``)."""

    tenant: str
    input: str
    headers: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def tenant_options(index: int, out: Path) -> list[str]:
    """The ``serve`` options that give server ``index`` its tenants: examples/fleet/tenants.yaml,
    two tenants naming the bundle's two policies (prod-eu with the candidate its manifest
    names as shadow, and staging, the default)."""
    del index, out
    return ["--tenants", str(TENANTS)]


def tenant_requests(index: int) -> list[TenantRequest]:
    """The decisions sent to server ``index``: both evictions for each tenant, prod-eu's
    labels in the ``Prunewarden-Labels`` header, staging's in the document."""
    del index
    inputs = ("eviction-healthy.json", "eviction-utc-constraint.json")
    header = {LABELS_HEADER: "deployment=prod-eu"}
    return [TenantRequest("prod-eu", name, header) for name in inputs] + [
        TenantRequest("staging", name, labels={"deployment": "staging"}) for name in inputs
    ]


def start_collector(out: Path, stack: ExitStack) -> str:
    """``prunewarden audit collect`` on loopback, writing one file per replica under
    ``out/collected``, stopped (SIGTERM) with ``stack``; its URL."""
    folder = out / "collected"
    command = ["audit", "collect", "--listen", "127.0.0.1:0", "--out", str(folder)]
    print(f"$ prunewarden {' '.join(command).replace(f'{out}/', '')}")
    process = subprocess.Popen(  # noqa: S603 - our own command, arguments as a list
        [PRUNEWARDEN, *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stack.callback(stop_process, process)
    for line in process.stdout or ():
        if found := _COLLECTING.search(line):
            threading.Thread(target=drain, args=(process.stdout,), daemon=True).start()
            print(f"  collector listening on {found.group(1)}")
            return found.group(1)
    raise SystemExit("the collector did not start")


def shipping_options(collector: str, index: int) -> list[str]:
    """The ``serve`` options that ship server ``index``'s log to ``collector`` as the replica
    ``server-INDEX``."""
    return ["--ship", f"{collector}/v1/logs", "--ship-replica", f"server-{index}"]


def collected_summary(collector: str, out: Path, servers: list[Server]) -> dict[str, Any]:
    """What the collector received from each server, and ``audit verify`` on each file."""
    replicas = call(f"{collector}/v1/replicas")
    print(f"GET {collector}/v1/replicas")
    summary: dict[str, Any] = {"replicas": {}}
    for server in servers:
        name = f"server-{server.index}"
        held = replicas[name]
        path = out / "collected" / f"{name}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        print(f"  {name}: {held['records']} records, head {held['head'][:19]}…")
        verified = prunewarden("audit", "verify", str(path), check=False)
        summary["replicas"][name] = {
            "records": held["records"],
            "lines": len(lines),
            "same_as_local": lines == local_lines(server),
            "audit_verify_exit": verified.returncode,
        }
    summary["files"] = sorted(p.name for p in (out / "collected").glob("*.jsonl"))
    return summary


def await_shipped(server: Server) -> dict[str, Any]:
    """The server's one shipping destination once it has acknowledged every record of the
    local log (as ``/v1/status`` counts them)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        (destination,) = call(f"{server.url}/v1/status")["log_shipping"]["destinations"]
        written = len(local_lines(server))
        if destination["shipped"] == written and destination["buffered_records"] == 0:
            return dict(destination)
        time.sleep(0.1)
    raise SystemExit(f"server {server.index} never shipped its whole log")


def local_lines(server: Server) -> list[str]:
    return server.audit_log.read_text(encoding="utf-8").splitlines()


# --- the bundle --------------------------------------------------------------------------------


def prunewarden(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a prunewarden command, show it and what it printed."""
    shown = " ".join(argument.replace(f"{ROOT}/", "") for argument in arguments)
    print(f"$ prunewarden {shown}")
    done = subprocess.run(  # noqa: S603 - our own command, arguments as a list
        [PRUNEWARDEN, *arguments], capture_output=True, text=True, check=False, timeout=120
    )
    for line in (done.stdout + done.stderr).splitlines():
        print(f"  {line}")
    if check and done.returncode != 0:
        raise SystemExit(done.returncode)
    return done


def build_signed_bundle(out: Path) -> tuple[Path, Path]:
    """A key pair, and the deployments' bundle built, signed and verified: (bundle, key)."""
    private, public = out / "signer.pem", out / "signer.pub.pem"
    bundle = out / "site" / "bundle.tar.gz"
    bundle.parent.mkdir(parents=True, exist_ok=True)
    prunewarden("bundle", "keygen", "--private", str(private), "--public", str(public))
    prunewarden(
        "bundle", "build", str(DEPLOY / "prod-eu.yaml"), str(DEPLOY / "staging.yaml"),
        "--shadow", f"prod-eu={DEPLOY / 'prod-eu-candidate.yaml'}",
        "--revision", REVISION, "--built-at", BUILT_AT, "--out", str(bundle),
    )  # fmt: skip
    prunewarden("bundle", "sign", str(bundle), "--key", str(private))
    prunewarden("bundle", "verify", str(bundle), "--key", str(public))
    return bundle, public


def tampered(bundle: bytes) -> bytes:
    """``bundle`` with one policy file changed after signing: the manifest and its signature
    untouched, so the file no longer has the SHA-256 the signed manifest lists."""
    raw = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as source,
        tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as target,
    ):
        for member in source.getmembers():
            stream = source.extractfile(member)
            data = stream.read() if stream is not None else b""
            if member.name == TAMPERED:
                data += b"# edited after signing\n"
                member.size = len(data)
            target.addfile(member, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def publish(site: Path, data: bytes) -> None:
    """Replace the served bundle whole (written aside, then renamed over it)."""
    partial = site / ".bundle.tar.gz.partial"
    partial.write_bytes(data)
    partial.replace(site / "bundle.tar.gz")


@contextmanager
def bundle_site(site: Path) -> Iterator[str]:
    """``site/bundle.tar.gz`` over HTTP on loopback, read at each request, with an ETag (its
    SHA-256) and a 304 for a matching If-None-Match; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (site / "bundle.tar.gz").read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest() + '"'
            fresh = self.headers.get("If-None-Match") == etag
            self.send_response(304 if fresh else 200)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0" if fresh else str(len(body)))
            self.end_headers()
            if not fresh:
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            """Quiet: the servers' records tell what they fetched."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/bundle.tar.gz"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- the servers -------------------------------------------------------------------------------


@dataclass
class Server:
    """One ``prunewarden serve --bundle`` and what the demo saw of it."""

    index: int
    folder: Path
    process: subprocess.Popen[str]
    url: str = ""
    seen: dict[str, Any] = field(default_factory=dict)

    @property
    def audit_log(self) -> Path:
        return self.folder / "audit.jsonl"


def start_server(index: int, out: Path, bundle_url: str, key: Path, extra: list[str]) -> Server:
    folder = out / f"server-{index}"
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(  # noqa: S603 - our own command, arguments as a list
        [
            PRUNEWARDEN, "serve", "--bundle", bundle_url, "--bundle-key", str(key),
            "--audit-log", str(folder / "audit.jsonl"), "--listen", "127.0.0.1:0",
            "--reload-interval", POLL, *extra,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
    )  # fmt: skip
    server = Server(index, folder, process)
    server.url = await_listening(process)
    print(f"server {index}: listening on {server.url}")
    return server


def await_listening(process: subprocess.Popen[str]) -> str:
    """The address a server prints once its socket is bound (its output is then drained)."""
    lines: list[str] = []
    for line in process.stdout or ():
        lines.append(line)
        if found := _LISTENING.search(line):
            threading.Thread(target=drain, args=(process.stdout,), daemon=True).start()
            return found.group(1)
    raise SystemExit("a server did not start:\n" + "".join(lines))


def drain(stream: IO[str]) -> None:
    for _ in stream:
        pass


def stop_process(process: subprocess.Popen[str]) -> int:
    """SIGTERM, and its exit code (SIGKILL if it does not stop within PATIENCE)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(PATIENCE)
    return process.returncode


def call(
    url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> Any:
    """GET (or POST ``body``) a server's route, its JSON answer (an error's problem document)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - a loopback http:// URL the server printed
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE) as response:  # noqa: S310 - as above
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return json.loads(exc.read())


def decide(server: Server) -> list[dict[str, Any]]:
    """Each request of :func:`tenant_requests`, decided by ``server``: one line each."""
    made = []
    for request in tenant_requests(server.index):
        document = json.loads((INPUTS / request.input).read_text(encoding="utf-8"))
        if request.labels:
            document["labels"] = request.labels
        decision = call(f"{server.url}/v1/evaluate", document, request.headers)
        policy = decision["policy"]
        made.append(
            {
                "tenant": request.tenant,
                "input": request.input,
                "labels_in": "header" if request.headers else "document",
                "outcome": decision["outcome"],
                "policy": f"{policy['name']}@{policy['version']}",
                "bundle_revision": policy.get("bundle_revision"),
            }
        )
        where = "header" if request.headers else "document"
        print(
            f"server {server.index}: {request.tenant} (labels in the {where}): {request.input}: "
            f"{decision['outcome']} under {policy['name']}@{policy['version']}, "
            f"bundle {policy.get('bundle_revision')}"
        )
    return made


def await_refusal(server: Server) -> tuple[dict[str, Any], dict[str, Any]]:
    """The /readyz document and the policy_reload_failed record, once the server has
    refused the bundle it last fetched."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        ready: dict[str, Any] = call(f"{server.url}/readyz")
        failed = records(server, "policy_reload_failed")
        if ready["bundle"]["healthy"] is False and failed:
            return ready, failed[0]
        time.sleep(0.1)
    raise SystemExit(f"server {server.index} never refused the tampered bundle")


def records(server: Server, kind: str) -> list[dict[str, Any]]:
    """The records of ``kind`` in the server's log so far (a line being written is not one)."""
    found = []
    for line in server.audit_log.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n"):
            record = json.loads(line)
            if record["kind"] == kind:
                found.append(record)
    return found


def shadow_verdicts(server: Server) -> list[str | None]:
    """What the shadow decided beside each decision, from the records (never in the answer)."""
    return [
        r["shadow"].get("outcome") if "shadow" in r else None for r in records(server, "decision")
    ]


# --- the story ---------------------------------------------------------------------------------


def run(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {"revision": REVISION, "servers": []}
    print("== A signed bundle: the deployments' policies, prod-eu's candidate as its shadow")
    bundle, key = build_signed_bundle(out)
    good = bundle.read_bytes()
    with ExitStack() as stack:
        url = stack.enter_context(bundle_site(bundle.parent))
        print("\n== A collector for the fleet's decision logs")
        collector = start_collector(out, stack)
        print(f"\n== {SERVERS} servers on the bundle at {url}, two tenants each, shipping")
        servers = []
        for index in range(1, SERVERS + 1):
            extra = [*tenant_options(index, out), *shipping_options(collector, index)]
            server = start_server(index, out, url, key, extra)
            stack.callback(stop_process, server.process)
            servers.append(server)
        print("\n== Decisions: each tenant's labels choose its policy, under the bundle revision")
        for server in servers:
            server.seen["decisions"] = decide(server)
        print("\n== The fleet's status")
        status = prunewarden("status", *(s.url for s in servers), check=False)
        summary["status_exit"] = status.returncode
        print(f"\n== A tampered bundle published ({TAMPERED} changed after signing)")
        publish(bundle.parent, tampered(good))
        for server in servers:
            ready, failed = await_refusal(server)
            detail = ready["bundle"]
            kept = failed["policy"]
            print(f"server {server.index}: /readyz {ready['status']}, bundle healthy false, "
                  f"revision {detail['revision']} kept")  # fmt: skip
            print(f"  problem: {detail['problems'][0]}")
            print(f"  record policy_reload_failed: {kept['name']}@{kept['version']} "
                  f"bundle {kept['bundle_revision']} kept")  # fmt: skip
            after = decide(server)
            server.seen["refusal"] = {
                "ready_status": ready["status"],
                "healthy": detail["healthy"],
                "revision_kept": detail["revision"],
                "problems": detail["problems"],
                "reload_failed_records": len(records(server, "policy_reload_failed")),
                "record_policy": kept,
                "decisions_after": after,
            }
        print("\n== Every record shipped")
        for server in servers:
            shipped = await_shipped(server)
            server.seen["shipped"] = shipped["shipped"]
            server.seen["dropped"] = shipped["dropped"]
            print(f"server {server.index}: {shipped['shipped']} records shipped, "
                  f"{shipped['dropped']} dropped, to {shipped['destination']}")  # fmt: skip
        status = prunewarden("status", *(s.url for s in servers), check=False)
        summary["status_exit_after_refusal"] = status.returncode
        print("\n== The servers stopped; each one's audit log verified")
        for server in servers:
            server.seen["stopped"] = stop_process(server.process)
            server.seen["local_records"] = len(local_lines(server))
            server.seen["shadow_outcomes"] = shadow_verdicts(server)
            outcomes = ", ".join(str(o) for o in server.seen["shadow_outcomes"])
            print(f"server {server.index}: the shadow decided {outcomes} (from its records)")
            verified = prunewarden("audit", "verify", str(server.audit_log), check=False)
            server.seen["audit_verify_exit"] = verified.returncode
            summary["servers"].append({"index": server.index, "url": server.url, **server.seen})
        print("\n== What the collector holds: one file per replica, verified")
        summary["collected"] = collected_summary(collector, out, servers)
    return summary


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python examples/fleet/fleet_demo.py OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    if out.exists() and any(out.iterdir()):
        print(f"{out}: not empty; give a new or empty folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PRUNEWARDEN_TOKEN", None)  # the servers listen on loopback, without one
    summary = run(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"\nsummary: {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
