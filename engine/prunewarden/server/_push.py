"""``serve --status-url URL``: the ``/v1/status`` document pushed to a collector, so that an
operator of many servers learns of each one without polling them all.

The push runs in a thread of its own: every ``interval`` seconds, and soon after each
activation (a new policy or bundle swapped in) and each new failure (a reload or fetch whose
problems differ from the last ones). A decision never waits for it: a receiver that is slow,
down or answering errors costs the push thread its timeout, nothing else; every failure is
counted and the last one shown in the status document's ``status_push`` detail. Pushes that
pile up while one is in flight collapse into the next one (the document is built when it is
sent, so it is never stale by more than one push).

The body is the status document as ``GET /v1/status`` answers it, as JSON; the
``Prunewarden-Instance`` header names the server's own address and ``Prunewarden-Replica`` the
name it ships as, so that one receiver (``audit collect``'s ``POST /v1/status``) can tell a
fleet's servers apart; with a token (``$PRUNEWARDEN_SHIP_TOKEN``, the one its log is shipped
with) it is presented as a bearer token. HTTP goes through the standard library (``urllib``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from prunewarden.decision import utc_now
from prunewarden.reload import ReloadResult
from prunewarden.shipping._sinks import REPLICA_HEADER

DEFAULT_INTERVAL = 10.0  # seconds between two pushes when nothing happens
PUSH_SECONDS = 5.0  # how long one push may take to connect, and between two reads
INSTANCE_HEADER = "Prunewarden-Instance"

STATUS_PUSH_DETAIL: dict[str, Any] = {
    "type": "object",
    "description": "With `--status-url`: where the status is pushed, and how pushes have done "
    "since start (a failed push never delays a decision)",
    "required": ["url", "interval", "pushed", "failed", "last_push_at", "last_failure"],
    "properties": {
        "url": {"type": "string"},
        "interval": {"type": "number"},
        "pushed": {"type": "integer", "description": "pushes the receiver accepted (2xx)"},
        "failed": {"type": "integer", "description": "pushes that failed, for any reason"},
        "last_push_at": {"type": ["string", "null"]},
        "last_failure": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"at": {"type": "string"}, "problem": {"type": "string"}},
                },
            ]
        },
    },
}

_diagnostics = logging.getLogger("prunewarden.server")


class StatusPush:
    """Pushes ``document()`` to ``url`` (see the module's docstring) as ``replica`` (None: no
    replica header), presenting ``token`` (None: none); :meth:`start` once the server's address
    is known, :meth:`stop` at shutdown; :meth:`observe` is a reload hook."""

    def __init__(  # noqa: PLR0913 - where, what, how often, and as whom
        self,
        url: str,
        document: Callable[[], Mapping[str, Any]],
        interval: float = DEFAULT_INTERVAL,
        timeout: float = PUSH_SECONDS,
        *,
        replica: str | None = None,
        token: str | None = None,
    ) -> None:
        self.url = url
        self._replica = replica
        self._token = token
        self.interval = interval
        self._document = document
        self._timeout = timeout
        self._instance = ""
        self._lock = threading.Lock()
        self._pushed = 0
        self._failed = 0
        self._last_push_at: str | None = None
        self._last_failure: dict[str, str] | None = None
        self._last_problems: tuple[str, ...] = ()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, instance: str) -> None:
        """Push now, then every interval and after each activation or new failure."""
        if self._thread is not None:
            return
        self._instance = instance
        self._thread = threading.Thread(target=self._run, name="prunewarden-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop pushing; a push in flight is given its timeout to end."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self._timeout + 1)

    def nudge(self) -> None:
        """Push soon, without waiting for the interval."""
        self._wake.set()

    def observe(self, result: ReloadResult) -> None:
        """A reload hook: an activation, or a failure unlike the last one, is pushed soon (a
        failure seen again at every poll is not news)."""
        if result.changed:
            self.nudge()
        if result.problems and result.problems != self._last_problems:
            self.nudge()
        self._last_problems = result.problems

    def detail(self) -> dict[str, Any]:
        """The ``status_push`` detail of the status document."""
        with self._lock:
            return {
                "url": self.url,
                "interval": self.interval,
                "pushed": self._pushed,
                "failed": self._failed,
                "last_push_at": self._last_push_at,
                "last_failure": self._last_failure,
            }

    def push(self) -> str | None:
        """One push, now: None when the receiver accepted it, else what failed (counted)."""
        try:
            body = json.dumps(self._document()).encode("utf-8")
            problem = self._post(body)
        except Exception as exc:  # noqa: BLE001 - a push never fails its server
            problem = f"the status could not be pushed ({type(exc).__name__}: {exc})"
        with self._lock:
            if problem is None:
                self._pushed += 1
                self._last_push_at = utc_now()
            else:
                self._failed += 1
                self._last_failure = {"at": utc_now(), "problem": problem}
        return problem

    def _post(self, body: bytes) -> str | None:
        headers = {"Content-Type": "application/json", INSTANCE_HEADER: self._instance}
        if self._replica is not None:
            headers[REPLICA_HEADER] = self._replica
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only: checked by ServerConfig
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310 - as above
                response.read()
        except urllib.error.HTTPError as exc:
            return f"{self.url}: HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            return f"{self.url}: cannot push: {reason}"
        return None

    def _run(self) -> None:
        reported: str | None = None  # a lasting failure is reported once
        while not self._stop.is_set():
            self._wake.clear()
            problem = self.push()
            if problem is not None and problem != reported:
                with contextlib.suppress(Exception):
                    _diagnostics.warning("status push failed: %s", problem)
            reported = problem
            self._wake.wait(self.interval)
