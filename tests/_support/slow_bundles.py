"""A real bundle server on loopback that can turn slow: it serves a bundle whole, or trickles
one byte of it at a time, a pause between two, for as long as the client keeps reading; and it
says when a trickled download has begun, so that a test acts while one is in flight."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class SlowBundleServer:
    """Serves ``body``; with ``trickle`` set, the headers, then a byte every ``pause`` seconds."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.trickle = False
        self.pause = 0.2
        self.trickling = threading.Event()  # set once a trickled download has begun
        self.url = ""
        self.stopping = threading.Event()

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        body, trickle = self.body, self.trickle
        handler.send_response(200)
        handler.send_header("ETag", f'"{len(body)}-{int(trickle)}"')
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not trickle:
            handler.wfile.write(body)
            return
        handler.wfile.flush()
        self.trickling.set()
        try:
            for index in range(len(body)):
                if self.stopping.wait(self.pause):
                    return
                handler.wfile.write(body[index : index + 1])
                handler.wfile.flush()
        except OSError:
            return  # the client gave up


@contextmanager
def slow_bundle_server(body: bytes, path: str = "/bundle.tar.gz") -> Iterator[SlowBundleServer]:
    """A :class:`SlowBundleServer` on 127.0.0.1, stopped (its trickles ended) on exit."""
    state = SlowBundleServer(body)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.answer(self)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            """Silent."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
        time.sleep(0)  # let trickling handlers see the stop
