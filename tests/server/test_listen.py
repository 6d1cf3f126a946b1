"""``--listen``: where a server listens, as docs/server.md spells it (``HOST:PORT``,
``[V6]:PORT``, ``unix:PATH``), and how a client names it; a bad address is one usage error."""

from __future__ import annotations

import pytest
from prunewarden.server import Listen, ServerConfigError, parse_listen


class TestParse:
    @pytest.mark.parametrize(
        ("text", "listen", "url"),
        [
            ("127.0.0.1:8181", Listen("127.0.0.1", 8181), "http://127.0.0.1:8181"),
            ("[::1]:0", Listen("::1", 0), "http://[::1]:0"),
            ("localhost:65535", Listen("localhost", 65535), "http://localhost:65535"),
            ("unix:/run/pdp.sock", Listen(unix_path="/run/pdp.sock"), "unix:/run/pdp.sock"),
        ],
    )
    def test_each_form_is_read_and_named_back(self, text: str, listen: Listen, url: str) -> None:
        """Each documented form is read as written, and a client names it back the same."""
        parsed = parse_listen(text)
        assert parsed == listen
        assert parsed.url() == url
        assert parsed.is_unix is (listen.unix_path is not None)

    def test_a_port_given_after_binding_is_named(self) -> None:
        """The URL of a server bound to port 0 names the port it got."""
        assert parse_listen("127.0.0.1:0").url(port=40123) == "http://127.0.0.1:40123"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("unix:", "the socket path is empty"),
            ("8181", "expected HOST:PORT or unix:PATH"),
            (":8181", "expected HOST:PORT or unix:PATH"),
            ("host:", "'' is not a TCP port"),
            ("host:http", "'http' is not a TCP port"),
            ("host:65536", "'65536' is not a TCP port"),
            ("host:-1", "'-1' is not a TCP port"),
        ],
    )
    def test_a_bad_address_is_refused(self, text: str, message: str) -> None:
        """An address that is not one of the forms is refused, quoting it."""
        with pytest.raises(ServerConfigError) as info:
            parse_listen(text)
        assert str(info.value) == f"--listen {text!r}: {message}"

    def test_the_default_is_loopback_8181(self) -> None:
        """Without --listen the server listens on 127.0.0.1:8181."""
        assert Listen().url() == "http://127.0.0.1:8181"
