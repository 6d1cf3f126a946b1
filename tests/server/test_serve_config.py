"""``prunewarden serve --config FILE``: every option of ``serve`` has a key of server-config.v1,
problems in the file are located, and the command line overrides the file."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _support.server import policy_text, running_server
from prunewarden._resources import schema
from prunewarden.cli._main import COMMANDS, _parser, run
from prunewarden.cli._serve_config import BY_KEY, NOT_SETTINGS, SETTINGS, _redacted

EVICTION: dict[str, Any] = {
    "check": "eviction",
    "segment": {"id": "turn-30", "kind": "turn", "tombstone_written": True, "tokens": 240},
    "score": 0.08,
    "perturbed_score": 0.1,
    "eviction_candidates": ["turn-30"],
}


def _serve(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    if stdin is None:
        code = run(["serve", *argv], stdout, stderr)
    else:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stdin", io.StringIO(stdin))
            code = run(["serve", *argv], stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def _printed(*argv: str, stdin: str | None = None) -> tuple[dict[str, dict[str, object]], str]:
    code, out, err = _serve("--print-config", *argv, stdin=stdin)
    assert (code, err) == (0, "")
    return yaml.safe_load(out), out


def _write(tmp_path: Path, text: str, name: str = "serve.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestEveryOption:
    def test_each_option_of_serve_has_a_key(self) -> None:
        """Walking serve's parser: every option but the printing ones stands for one setting,
        and every setting for an option of that name."""
        add, _ = COMMANDS["serve"].functions()
        parser = _parser(io.StringIO(), "serve", add)
        commands = next(a for a in parser._actions if a.dest == "command")
        assert isinstance(commands.choices, dict)
        serve = commands.choices["serve"]
        options = {a.dest: a.option_strings for a in serve._actions if a.dest not in NOT_SETTINGS}
        by_dest = {setting.dest: setting for setting in SETTINGS}
        assert sorted(options) == sorted(by_dest)
        for dest, strings in options.items():
            assert by_dest[dest].option in strings
        assert len(options) >= 34  # the 32 options of serve, --cel and --embedder

    def test_each_key_is_in_the_schema_and_back(self) -> None:
        """The schema's keys are exactly the settings' (beside configVersion)."""
        properties = schema("server-config")["properties"]
        keys = {
            f"{section}.{name}"
            for section, body in properties.items()
            if section != "configVersion"
            for name in body["properties"]
        }
        assert keys == set(BY_KEY)

    def test_the_defaults_are_the_options_documented_ones(self) -> None:
        """With nothing given, the effective config holds the defaults serve --help states."""
        printed, _ = _printed()
        assert printed["listen"] == {"address": "127.0.0.1:8181", "socketMode": "660"}
        assert printed["audit"] == {"log": "prunewarden-audit.jsonl", "fsync": "batch"}
        assert printed["policy"] == {"reloadInterval": 1.0}


class TestLocatedProblems:
    def test_a_bad_value_is_located_in_the_file(self, tmp_path: Path) -> None:
        """Each bad value: FILE:LINE:COL: $.path: message, all of them, exit 2."""
        path = _write(
            tmp_path,
            "configVersion: 1\npolicy:\n  file: p.yaml\nlimits:\n  maxConnections: 0\n"
            "  requestTimeout: fast\nlisten:\n  address: nohost\n",
        )
        code, _, err = _serve("--config", str(path))
        assert code == 2
        assert err.splitlines() == [
            f"{path}:5:19: $.limits.maxConnections: 0 is less than the minimum of 1",
            f"{path}:6:19: $.limits.requestTimeout: 'fast' is not of type 'number'",
            (
                f"{path}:8:12: $.listen.address: 'nohost' is not valid here: an address, a "
                "host and a port or a unix socket"
            ),
        ]

    def test_an_unknown_key_and_version_are_located(self, tmp_path: Path) -> None:
        """A key the format lacks, and another format version, are named where they are."""
        path = _write(tmp_path, '{"configVersion": 2,\n "limit": {}}', name="serve.json")
        code, _, err = _serve("--config", str(path))
        assert code == 2
        assert err.splitlines()[0] == f"{path}:1:19: $.configVersion: 2 should be 1"
        assert err.splitlines()[1].startswith(f"{path}:2:2: $.limit: unknown field 'limit'")

    def test_a_bad_set_is_named(self) -> None:
        """--set with a bad value, or a key that does not exist, names the --set."""
        code, _, err = _serve("--set", "limits.headerTimeout=-3", "--set", "nope=1")
        assert code == 2
        assert "--set limits.headerTimeout: $.limits.headerTimeout: -3 is less than" in err
        assert "--set nope=1: $: expected KEY=VALUE" in err

    def test_a_conflict_found_later_names_the_keys_and_the_file(self, tmp_path: Path) -> None:
        """A problem the server finds in values the file gave names the file and its keys,
        not the options."""
        path = _write(
            tmp_path, "configVersion: 1\npolicy:\n  file: p.yaml\nbundle:\n  source: b.tar\n"
        )
        code, _, err = _serve("--config", str(path))
        assert code == 2
        assert err == (
            f"prunewarden serve: {path}:3:9: give $.policy.file FILE or $.bundle.source "
            "PATH|URL (one)\n"
        )


class TestPrecedence:
    def test_an_option_overrides_set_which_overrides_the_file(self, tmp_path: Path) -> None:
        """File < --set < option, each value's source printed beside it."""
        path = _write(
            tmp_path,
            "configVersion: 1\nlimits:\n  maxConnections: 10\n  headerTimeout: 4\n"
            "  bodyTimeout: 7\n",
        )
        printed, text = _printed(
            "--config",
            str(path),
            "--set",
            "limits.headerTimeout=5",
            "--set",
            "limits.maxConnections=20",
            "--max-connections",
            "30",
        )
        assert printed["limits"]["maxConnections"] == 30
        assert printed["limits"]["headerTimeout"] == 5
        assert printed["limits"]["bodyTimeout"] == 7
        assert "maxConnections: 30  # --max-connections" in text
        assert "headerTimeout: 5  # --set limits.headerTimeout" in text
        assert f"bodyTimeout: 7  # {path}:5:16" in text

    def test_paths_in_the_file_are_relative_to_its_folder(self, tmp_path: Path) -> None:
        """A path the file gives is read from the file's folder; an option's from the working
        directory."""
        path = _write(
            tmp_path,
            "configVersion: 1\npolicy:\n  file: p.yaml\naudit:\n  log: logs/a.jsonl\n"
            "sessions:\n  store: sqlite:s.db\n",
        )
        printed, _ = _printed("--config", str(path), "--lock", "x.lock")
        assert printed["policy"]["file"] == str(tmp_path / "p.yaml")
        assert printed["policy"]["lock"] == "x.lock"
        assert printed["audit"]["log"] == str(tmp_path / "logs" / "a.jsonl")
        assert printed["sessions"]["store"] == f"sqlite:{tmp_path / 's.db'}"

    def test_json_from_stdin(self) -> None:
        """--config - reads the file, JSON as well as YAML, from stdin."""
        printed, text = _printed(
            "--config", "-", stdin='{"configVersion": 1, "shipping": {"replica": "eu-1"}}'
        )
        assert printed["shipping"]["replica"] == "eu-1"
        assert "# <stdin>:1:" in text


class TestRedaction:
    def test_passwords_and_tokens_in_urls_are_not_printed(self, tmp_path: Path) -> None:
        """--print-config hides a URL's password and a query parameter naming a secret."""
        path = _write(
            tmp_path,
            "configVersion: 1\nsessions:\n  store: redis://:hunter2@localhost:6379/0\n"
            "shipping:\n  destinations: ['https://c.example/v1/logs?api_key=s3cret&x=1']\n",
        )
        printed, text = _printed("--config", str(path))
        assert "hunter2" not in text
        assert "s3cret" not in text
        assert printed["sessions"]["store"] == "redis://:***@localhost:6379/0"
        assert printed["shipping"]["destinations"] == ["https://c.example/v1/logs?api_key=***&x=1"]

    def test_an_error_naming_a_store_hides_its_password(self, tmp_path: Path) -> None:
        """A session store that cannot be reached is named without its password."""
        code, _, err = _serve(
            "--policy",
            str(Path(__file__).parents[2] / "policies" / "default.yaml"),
            "--audit-log",
            str(tmp_path / "audit.jsonl"),
            "--sessions",
            "redis://:hunter2@127.0.0.1:1/0",
        )
        assert code == 2
        assert "--sessions redis://:***@127.0.0.1:1/0: " in err
        assert "hunter2" not in err

    def test_a_message_naming_a_url_pattern_is_read_as_text(self) -> None:
        """A message holding something urllib cannot split (the pattern of a Kafka URL, a bad
        bracket) is shown with any password still hidden, never an internal error."""
        assert _redacted("kafka://HOST:PORT[,HOST:PORT]/TOPIC") == (
            "kafka://HOST:PORT[,HOST:PORT]/TOPIC"
        )
        assert _redacted("redis://u:hunter2@[bad/0") == "redis://u:***@[bad/0"


def test_a_server_runs_from_its_config_file(tmp_path: Path) -> None:
    """serve --config: the policy and a limit from the file, the listen address from the
    command line; the file's limit is enforced (413) and a decision is served."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "policy.yaml").write_text(
        policy_text({}, name="conf", version="1.0.0"), encoding="utf-8"
    )
    config = _write(
        tmp_path / "conf",
        "configVersion: 1\npolicy:\n  file: policy.yaml\nlimits:\n  maxRequestBytes: 2000\n",
    )
    with running_server(None, tmp_path, "--config", str(config)) as server:
        assert "policy conf@1.0.0" in " ".join(server.startup)
        answer = httpx.post(f"{server.url}/v1/evaluate", json=EVICTION, timeout=30)
        assert answer.status_code == 200, answer.text
        big = {**EVICTION, "segment": {**EVICTION["segment"], "id": "x" * 3000}}
        too_big = httpx.post(f"{server.url}/v1/evaluate", content=json.dumps(big), timeout=30)
        assert too_big.status_code == 413
