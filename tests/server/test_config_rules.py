"""What a server is told at start (docs/server.md, "Options" and "Access"): the documented
defaults, the token read from a file or the environment, the limits that must be positive, the
metrics address that must be loopback TCP, and where sessions are kept by default."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from prunewarden.server import Listen, ServerConfig, ServerConfigError, TenantsConfig, TenantSpec
from prunewarden.server._config import read_token

TOKEN = "s3cret-token"  # noqa: S105 - a test token
ANY = "0.0.0.0"  # noqa: S104 - only configured here, never bound
LIMITS = (
    "max_request_bytes",
    "request_seconds",
    "session_ttl",
    "max_live_sessions",
    "max_connections",
    "header_seconds",
    "body_seconds",
    "keep_alive_seconds",
)


def config(tmp_path: Path, **changes: Any) -> ServerConfig:
    base = ServerConfig("p.yaml", str(tmp_path / "audit.jsonl"), Listen())
    return dataclasses.replace(base, **changes)


class TestDefaults:
    def test_the_documented_defaults(self, tmp_path: Path) -> None:
        """Each option's default is the one the options table of docs/server.md gives."""
        made = config(tmp_path)
        assert made.listen.url() == "http://127.0.0.1:8181"
        assert made.socket_mode == 0o660
        assert made.audit_fsync == "batch"
        assert made.reload_interval == 1.0
        assert made.max_request_bytes == 64 * 1024 * 1024
        assert made.request_seconds == 30
        assert made.session_ttl == 86400
        assert made.max_live_sessions == 1000
        assert made.max_connections == 1000
        assert made.header_seconds == 10
        assert made.body_seconds == 60
        assert made.keep_alive_seconds == 5
        assert (made.token, made.metrics_listen, made.sessions) == (None, None, None)

    def test_sessions_default_to_a_file_next_to_the_audit_log(self, tmp_path: Path) -> None:
        """Without --sessions, sessions are kept in sessions.sqlite3 beside the audit log."""
        expected = f"sqlite:{tmp_path / 'sessions.sqlite3'}"
        assert config(tmp_path).session_store_url == expected

    def test_a_given_session_store_is_used_as_given(self, tmp_path: Path) -> None:
        """--sessions is used as written."""
        made = config(tmp_path, sessions="redis://127.0.0.1:6379/0")
        assert made.session_store_url == "redis://127.0.0.1:6379/0"


class TestLimits:
    @pytest.mark.parametrize("name", LIMITS)
    @pytest.mark.parametrize("value", [0, -1])
    def test_a_limit_that_is_not_positive_is_refused(
        self, tmp_path: Path, name: str, value: int
    ) -> None:
        """Each limit must be positive: zero or less is refused before anything binds."""
        with pytest.raises(ServerConfigError, match="must be positive"):
            config(tmp_path, **{name: value})

    @pytest.mark.parametrize("name", LIMITS)
    def test_the_smallest_positive_limit_is_accepted(self, tmp_path: Path, name: str) -> None:
        """A limit of 1 (or a fraction of a second) is positive: accepted (the control)."""
        value = 1 if name in {"max_request_bytes", "max_live_sessions", "max_connections"} else 0.5
        assert getattr(config(tmp_path, **{name: value}), name) == value


class TestMetricsAddress:
    @pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
    def test_loopback_tcp_is_accepted(self, tmp_path: Path, host: str) -> None:
        """--metrics-listen on a loopback TCP address is accepted."""
        made = config(tmp_path, metrics_listen=Listen(host=host, port=9100))
        assert made.metrics_listen == Listen(host=host, port=9100)

    @pytest.mark.parametrize(
        "listen",
        [Listen(host=ANY, port=9100), Listen(host="example.com", port=9100)],
        ids=["any", "name"],
    )
    def test_beyond_loopback_is_refused_even_with_a_token(
        self, tmp_path: Path, listen: Listen
    ) -> None:
        """Metrics are served without the token, so only on loopback, token or not."""
        with pytest.raises(ServerConfigError, match="loopback TCP address only"):
            config(tmp_path, metrics_listen=listen, token=TOKEN)

    def test_a_unix_socket_is_refused(self, tmp_path: Path) -> None:
        """A unix socket is not a loopback TCP address: refused."""
        with pytest.raises(ServerConfigError, match=r"--metrics-listen unix:/tmp/m\.sock:"):
            config(tmp_path, metrics_listen=Listen(unix_path="/tmp/m.sock"))  # noqa: S108


class TestToken:
    def test_the_file_gives_its_first_line(self, tmp_path: Path) -> None:
        """--token-file: the token is the file's line, without its newline or blanks."""
        path = tmp_path / "token"
        path.write_text(f"  {TOKEN}\n", encoding="utf-8")
        assert read_token(str(path), {"PRUNEWARDEN_TOKEN": "from-env"}) == TOKEN

    def test_the_environment_when_no_file_is_given(self) -> None:
        """Without --token-file, $PRUNEWARDEN_TOKEN is the token."""
        assert read_token(None, {"PRUNEWARDEN_TOKEN": f" {TOKEN}\n"}) == TOKEN

    @pytest.mark.parametrize("environ", [{}, {"PRUNEWARDEN_TOKEN": ""}, {"PRUNEWARDEN_TOKEN": " "}])
    def test_no_token_anywhere_is_none(self, environ: dict[str, str]) -> None:
        """Neither a file nor a (non-blank) variable: no token is asked."""
        assert read_token(None, environ) is None

    def test_the_process_environment_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without an environment given, the process's own is read."""
        monkeypatch.setenv("PRUNEWARDEN_TOKEN", TOKEN)
        assert read_token(None) == TOKEN

    def test_an_empty_file_is_refused(self, tmp_path: Path) -> None:
        """A token file holding nothing is refused, naming the file."""
        path = tmp_path / "token"
        path.write_text("\n", encoding="utf-8")
        with pytest.raises(ServerConfigError) as info:
            read_token(str(path), {"PRUNEWARDEN_TOKEN": TOKEN})
        assert str(info.value) == f"--token-file {path}: the file holds no token"

    def test_a_missing_file_is_refused(self, tmp_path: Path) -> None:
        """A token file that cannot be read is refused with the reason, not the variable's."""
        path = tmp_path / "missing"
        with pytest.raises(ServerConfigError) as info:
            read_token(str(path), {"PRUNEWARDEN_TOKEN": TOKEN})
        assert str(info.value) == f"--token-file {path}: cannot read: No such file or directory"

    def test_a_file_that_is_not_text_is_refused(self, tmp_path: Path) -> None:
        """A token file that is not UTF-8 is refused as such."""
        path = tmp_path / "token"
        path.write_bytes(b"\xff\xfe")
        with pytest.raises(ServerConfigError) as info:
            read_token(str(path))
        assert str(info.value) == f"--token-file {path}: cannot read: not UTF-8 text"

    def test_beyond_loopback_the_message_names_the_ways(self, tmp_path: Path) -> None:
        """The refusal without a token names the address and both ways to give one."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, listen=Listen(host=ANY, port=80))
        assert str(info.value) == (
            "refusing to listen on http://0.0.0.0:80 without a token: set PRUNEWARDEN_TOKEN "
            "or pass --token-file (or listen on loopback or a unix socket)"
        )


class TestPolicyOrBundle:
    BOTH = "give a policy (--policy FILE) or a bundle (--bundle PATH|URL), not both"
    BUNDLE = "--bundle needs --bundle-key PUBKEY, and takes no --shadow (its manifest names it)"
    KEY = b"-----BEGIN PUBLIC KEY-----\n"

    def test_a_bundle_with_its_key_is_accepted(self, tmp_path: Path) -> None:
        """A bundle and its public key, without a policy file, is a server's policy source."""
        made = config(tmp_path, policy=None, bundle="b.tar", bundle_key=self.KEY)
        assert (made.policy, made.bundle, made.bundle_key) == (None, "b.tar", self.KEY)

    def test_neither_a_policy_nor_a_bundle_is_refused(self, tmp_path: Path) -> None:
        """A server with no policy source is refused, naming both options."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, policy=None)
        assert str(info.value) == self.BOTH

    def test_a_policy_and_a_bundle_together_are_refused(self, tmp_path: Path) -> None:
        """A policy file and a bundle at once are refused: one source, not two."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, bundle="b.tar", bundle_key=self.KEY)
        assert str(info.value) == self.BOTH

    def test_a_bundle_without_its_key_is_refused(self, tmp_path: Path) -> None:
        """A bundle whose signature nothing can check is refused."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, policy=None, bundle="b.tar")
        assert str(info.value) == self.BUNDLE

    def test_a_bundle_with_a_shadow_is_refused(self, tmp_path: Path) -> None:
        """A bundle takes no shadow policy yet."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, policy=None, bundle="b.tar", bundle_key=self.KEY, shadow="c.yaml")
        assert str(info.value) == self.BUNDLE

    def test_a_policy_file_may_have_a_shadow(self, tmp_path: Path) -> None:
        """The shadow restriction is the bundle's: a policy file keeps its shadow."""
        assert config(tmp_path, shadow="c.yaml").shadow == "c.yaml"


class TestStatusPush:
    def test_no_push_by_default(self, tmp_path: Path) -> None:
        """Without --status-url nothing is pushed; the interval defaults to 10 seconds."""
        made = config(tmp_path)
        assert (made.status_url, made.status_interval) == (None, 10.0)

    @pytest.mark.parametrize("url", ["http://127.0.0.1:9/s", "https://fleet.internal/status"])
    def test_an_http_url_is_accepted(self, tmp_path: Path, url: str) -> None:
        """http:// and https:// URLs are where a status may be pushed."""
        assert config(tmp_path, status_url=url, status_interval=0.5).status_url == url

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            (
                {"status_url": "unix:/tmp/x.sock"},
                "--status-url 'unix:/tmp/x.sock': expected an http:// or https:// URL",
            ),
            (
                {"status_url": "http://127.0.0.1:9/s", "status_interval": 0.0},
                "--status-interval 0: must be positive",
            ),
            ({"status_interval": -1.0}, "--status-interval -1: must be positive"),
        ],
    )
    def test_a_bad_status_url_or_interval_is_refused(
        self, tmp_path: Path, changes: dict[str, Any], message: str
    ) -> None:
        """Only http(s) URLs and positive intervals: ServerConfigError (exit 2 from serve)."""
        with pytest.raises(ServerConfigError) as info:
            config(tmp_path, **changes)
        assert str(info.value) == message


class TestTenants:
    TENANTS = TenantsConfig((TenantSpec("a", "a.yaml"),), "a")

    @pytest.mark.parametrize(
        ("option", "field"),
        [
            ("--policy", "policy"),
            ("--shadow", "shadow"),
            ("--lock", "lock"),
            ("--bundle-policy", "bundle_policy"),
        ],
    )
    def test_each_tenant_names_its_own_files(self, tmp_path: Path, option: str, field: str) -> None:
        """With tenants, a server-wide policy, shadow, lock or bundle policy is refused."""
        given = {"policy": None, field: "x"}
        with pytest.raises(ServerConfigError) as refused:
            ServerConfig(
                audit_log=str(tmp_path / "a.jsonl"),
                listen=Listen(),
                tenants=self.TENANTS,
                **given,  # type: ignore[arg-type]
            )
        assert str(refused.value) == f"--tenants names each tenant's policy: leave out {option}"

    def test_tenants_of_a_bundle_need_its_key(self, tmp_path: Path) -> None:
        """``--bundle`` with tenants still needs ``--bundle-key``."""
        with pytest.raises(ServerConfigError, match="--bundle needs --bundle-key"):
            ServerConfig(
                None, str(tmp_path / "a.jsonl"), Listen(), bundle="b.tar.gz", tenants=self.TENANTS
            )

    def test_tenants_alone_are_enough(self, tmp_path: Path) -> None:
        """Neither --policy nor --bundle is asked beside tenants."""
        config = ServerConfig(None, str(tmp_path / "a.jsonl"), Listen(), tenants=self.TENANTS)
        assert config.tenants is self.TENANTS
