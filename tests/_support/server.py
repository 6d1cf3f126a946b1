"""A real ``prunewarden serve`` in a subprocess, for the server tests.

Started on a loopback port chosen by the kernel (``--listen 127.0.0.1:0``; the server prints the
address) or on a unix socket; ready once ``/readyz`` answers 200, polled with a bounded timeout;
always stopped (SIGTERM, then SIGKILL) by whoever started it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import httpx
import yaml

PRUNEWARDEN = str(Path(sys.executable).with_name("prunewarden"))
STARTUP_SECONDS = 60.0  # generous: a loaded 2-core machine imports slowly
STOP_SECONDS = 30.0
_LISTENING = re.compile(r"listening on (\S+)")


class Server:
    """A running server: its address, its process, its output so far."""

    def __init__(
        self,
        process: subprocess.Popen[str],
        url: str,
        audit_log: Path,
        startup: tuple[str, ...] = (),
    ) -> None:
        self.process = process
        self.url = url
        self.audit_log = audit_log
        self.startup = startup  # what the server printed up to its "listening" line

    def client(self, token: str | None = None) -> httpx.Client:
        """A plain HTTP client of the server (TCP or unix socket)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if self.url.startswith("unix:"):
            transport = httpx.HTTPTransport(uds=self.url[len("unix:") :])
            return httpx.Client(
                base_url="http://prunewarden", transport=transport, headers=headers, timeout=30
            )
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for it; SIGKILL if it does not stop in time."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        return self.process.returncode


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


@contextmanager
def running_server(
    policy: Path | str | None,
    workdir: Path,
    *options: str,
    listen: str = "127.0.0.1:0",
    token: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    """A server on ``policy`` logging to ``workdir/audit.jsonl``; stopped on exit. With
    ``policy`` None, ``options`` say where the policy comes from (``--bundle``)."""
    audit_log = workdir / "audit.jsonl"
    environment = {**os.environ, **(env or {})}
    environment.pop("PRUNEWARDEN_TOKEN", None)
    if token is not None:
        environment["PRUNEWARDEN_TOKEN"] = token
    process = subprocess.Popen(
        [
            PRUNEWARDEN,
            "serve",
            *(["--policy", str(policy)] if policy is not None else []),
            "--audit-log",
            str(audit_log),
            "--listen",
            listen,
            "--reload-interval",
            "0.2",
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=workdir,
    )
    server: Server | None = None
    try:
        url, startup = _await_address(process)
        server = Server(process, url, audit_log, startup)
        _await_ready(server, token)
        yield server
    finally:
        if server is not None:
            server.stop()
        elif process.poll() is None:
            process.kill()
        with suppress(subprocess.TimeoutExpired):
            process.wait(STOP_SECONDS)
        if process.stdout is not None:
            process.stdout.close()


def _await_address(process: subprocess.Popen[str]) -> tuple[str, tuple[str, ...]]:
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + STARTUP_SECONDS
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            if process.poll() is not None and lines.empty():
                break
            continue
        seen.append(line)
        if found := _LISTENING.search(line):
            return found.group(1), tuple(seen)
    process.kill()
    raise AssertionError("the server did not start:\n" + "".join(seen))


def _await_ready(server: Server, token: str | None) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    with server.client(token) as client:
        while time.monotonic() < deadline:
            with suppress(httpx.TransportError):
                if client.get("/readyz").status_code == 200:
                    return
            if server.process.poll() is not None:
                break
            time.sleep(0.05)
    raise AssertionError("the server never became ready")


def policy_text(spec: dict[str, object], *, name: str, version: str) -> str:
    """A minimal policy stating ``spec`` (every other field defaults)."""
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": name, "version": version},
        "spec": spec,
    }
    return yaml.safe_dump(document, sort_keys=False)


def audit_decisions(path: Path) -> list[dict[str, Any]]:
    """The decision records of an audit log, as far as its last complete line: a log read while
    the server writes may end in part of a record."""
    complete, _, _torn = path.read_bytes().rpartition(b"\n")
    records = [json.loads(line) for line in complete.splitlines()]
    return [r for r in records if r.get("kind") == "decision"]
