#!/usr/bin/env python3
"""The container's health and readiness probe: ``prunewarden-probe /healthz`` or ``/readyz``.

Asks the server the image runs at $PRUNEWARDEN_URL (default: its unix socket) and exits 0 when
the answer is 200, 1 otherwise, with one line saying why. Docker's HEALTHCHECK and the
Kubernetes probes of deploy/ run it: the server listens on a unix socket, which neither an HTTP
probe nor a plain `curl` of a slim image can reach. Standard library only, so that it starts in
a few tens of milliseconds and needs nothing the image might lack.
"""

from __future__ import annotations

import http.client
import os
import socket
import sys
from urllib.parse import urlsplit

DEFAULT_URL = "unix:/run/prunewarden/pdp.sock"
TIMEOUT = 3.0  # seconds; below the probes' timeoutSeconds, so a hung server fails the probe here


class UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(self.path)


def connection(url: str) -> http.client.HTTPConnection:
    """A connection to ``unix:/path.sock`` or ``http://host:port``."""
    if url.startswith("unix:"):
        return UnixConnection(url.removeprefix("unix:"))
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        msg = f"PRUNEWARDEN_URL must be unix:/path.sock or http://host:port, not {url!r}"
        raise ValueError(msg)
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=TIMEOUT)


def probe(url: str, path: str) -> tuple[bool, str]:
    """Whether ``GET path`` answers 200, and a line saying what came back."""
    try:
        client = connection(url)
        try:
            client.request("GET", path)
            answer = client.getresponse()
            answer.read()
        finally:
            client.close()
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return False, f"{path}: {url}: {exc}"
    return answer.status == http.client.OK, f"{path}: {answer.status} {answer.reason}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("/healthz", "/readyz"):
        sys.stderr.write("usage: prunewarden-probe /healthz|/readyz\n")
        return 2
    healthy, line = probe(os.environ.get("PRUNEWARDEN_URL", DEFAULT_URL), argv[0])
    (sys.stdout if healthy else sys.stderr).write(line + "\n")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
