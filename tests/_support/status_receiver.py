"""A real HTTP server on loopback receiving status pushes (``serve --status-url``).

Each ``POST`` is kept (its headers and JSON body) in a queue the test reads with a bounded wait;
the answer is ``status`` (200 unless a test asks for an error), and a test may ``hold`` every
answer until it releases them, to play a receiver that does not answer.
"""

from __future__ import annotations

import http.server
import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

PATIENCE = 60.0  # seconds a push may take to arrive on a loaded machine


@dataclass(frozen=True)
class Push:
    """One push as received."""

    headers: dict[str, str]
    document: dict[str, Any]


class Receiver:
    """What the receiver answers, and what it has received."""

    def __init__(self) -> None:
        self.url = ""
        self.status = 200
        self.hold = threading.Event()
        self.hold.set()  # set: answer at once; clear it to hold answers until set again
        self.pushes: queue.Queue[Push] = queue.Queue()

    def next(self) -> Push:
        """The next push received (AssertionError if none comes in time)."""
        try:
            return self.pushes.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError("no status push arrived") from None

    def until(self, wanted: Any) -> Push:
        """The first push from now whose document satisfies ``wanted``."""
        while True:
            push = self.next()
            if wanted(push.document):
                return push


@contextmanager
def status_receiver() -> Iterator[Receiver]:
    """A :class:`Receiver` on 127.0.0.1 (a port the kernel chose), stopped on exit."""
    state = Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.pushes.put(Push(dict(self.headers.items()), json.loads(body)))
            state.hold.wait(PATIENCE)
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            """Silent: the tests read ``state.pushes``."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/status-pushes"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.hold.set()
        server.shutdown()
        server.server_close()
        thread.join()
