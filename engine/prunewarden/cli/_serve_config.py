"""``serve --config FILE``, ``--set KEY=VALUE`` and ``--print-config``: every setting of ``serve``
in one file (``server-config.v1``, YAML or JSON; docs/server.md, "A config file").

Each setting is a row of :data:`SETTINGS`: its dotted key in the file and the ``serve`` option
it stands for (a test walks the parser so that no option is left without a key). A value is
taken, in order of precedence, from the option given on the command line, the last
``--set`` of its key, the file, else the option's default. Problems in the file are located
as a policy's are (``serve.yaml:7:18: $.limits.maxConnections: 0 is less than the minimum of
1``), all of them reported together, exit 2; a problem the server finds later in a value the
file gave names the key, not the option.

Paths in the file are relative to the file's folder, as a tenants file's are; paths given on
the command line (options and ``--set``) to the working directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from prunewarden._schemas import read_yaml_file, schema_of, schema_problems, validator
from prunewarden._source import Parsed, parse_yaml
from prunewarden.errors import ExitCode, Problem, ProblemsError
from prunewarden.limits import (
    BODY_SECONDS,
    BUNDLE_FETCH_SECONDS,
    HEADER_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_CONNECTIONS,
    MAX_LIVE_SESSIONS,
    MAX_POLICY_BYTES,
    MAX_REQUEST_BYTES,
    REQUEST_SECONDS,
    SESSION_IDLE_SECONDS,
)
from prunewarden.shipping import DEFAULT_BUFFER_BYTES, DEFAULT_BUFFER_RECORDS

SCHEMA = "server-config"
CONFIG_VERSION = 1


class ServerConfigFileError(ProblemsError):
    """A server config file (or a ``--set``) that cannot be used: unreadable, not valid
    against ``server-config.v1``, or naming a setting that does not exist."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its dotted ``key`` in the file, the ``dest`` of the ``serve`` option it
    stands for, its default, and how a relative path in it is read (``kind``)."""

    key: str
    dest: str
    default: Any = None
    kind: str = "value"  # path | source (a path or a URL) | store | listen | value

    @property
    def option(self) -> str:
        return "--" + self.dest.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("policy.file", "policy", kind="path"),
    Setting("policy.shadow", "shadow", kind="path"),
    Setting("policy.lock", "lock", kind="path"),
    Setting("policy.reloadInterval", "reload_interval", 1.0),
    Setting("engine.cel", "cel"),
    Setting("engine.embedder", "embedder"),
    Setting("bundle.source", "bundle", kind="source"),
    Setting("bundle.key", "bundle_key", kind="path"),
    Setting("bundle.policy", "bundle_policy"),
    Setting("bundle.timeout", "bundle_timeout", BUNDLE_FETCH_SECONDS),
    Setting("bundle.minSequence", "bundle_min_sequence"),
    Setting("bundle.allowRollback", "bundle_allow_rollback", default=False),
    Setting("tenants.file", "tenants", kind="path"),
    Setting("tenants.trustedLabelsHeader", "trusted_labels_header"),
    Setting("audit.log", "audit_log", "prunewarden-audit.jsonl", kind="path"),
    Setting("audit.fsync", "audit_fsync", "batch"),
    Setting("sessions.store", "sessions", kind="store"),
    Setting("sessions.ttl", "session_ttl", SESSION_IDLE_SECONDS),
    Setting("sessions.maxLive", "max_live_sessions", MAX_LIVE_SESSIONS),
    Setting("listen.address", "listen", "127.0.0.1:8181", kind="listen"),
    Setting("listen.socketMode", "socket_mode", "660"),
    Setting("auth.tokenFile", "token_file", kind="path"),
    Setting("limits.maxRequestBytes", "max_request_bytes", MAX_REQUEST_BYTES),
    Setting("limits.requestTimeout", "request_timeout", REQUEST_SECONDS),
    Setting("limits.maxConnections", "max_connections", MAX_CONNECTIONS),
    Setting("limits.headerTimeout", "header_timeout", HEADER_SECONDS),
    Setting("limits.bodyTimeout", "body_timeout", BODY_SECONDS),
    Setting("limits.keepAliveTimeout", "keep_alive_timeout", KEEP_ALIVE_SECONDS),
    Setting("metrics.listen", "metrics_listen", kind="listen"),
    Setting("status.url", "status_url"),
    Setting("status.interval", "status_interval", 10.0),
    Setting("shipping.destinations", "ship", default=()),
    Setting("shipping.replica", "ship_replica"),
    Setting("shipping.bufferRecords", "ship_buffer_records", DEFAULT_BUFFER_RECORDS),
    Setting("shipping.bufferBytes", "ship_buffer_bytes", DEFAULT_BUFFER_BYTES),
)
BY_KEY = {setting.key: setting for setting in SETTINGS}
# The options of ``serve`` that are no setting: what it prints instead of serving, and these.
NOT_SETTINGS = ("help", "print_openapi", "print_config", "config", "set")


def add_config_options(serve: Any) -> None:
    """``--config``, ``--set`` and ``--print-config``; and every setting's option defaulting to
    None, so that an option given on the command line is told from one left out."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        help="read every setting from this file (server-config.v1 YAML or JSON, - for stdin); "
        "an option given here overrides it (docs/server.md)",
    )
    serve.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one key of the config (dotted, e.g. limits.maxConnections=512; repeatable); "
        "overrides the file, and an option overrides it",
    )
    serve.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective config (each value's source as a comment, secrets "
        "redacted) as a server-config.v1 file, and exit",
    )


def unset_defaults(serve: argparse.ArgumentParser) -> None:
    """Every setting's option defaults to None (its default is :data:`SETTINGS`'), called once
    the parser has every option."""
    serve.set_defaults(**{setting.dest: None for setting in SETTINGS})


@dataclass
class Effective:
    """Each setting's value (by key) and where it came from: the option, ``--set KEY``, a
    place in the file (``FILE:LINE:COL``), or ``default``."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    source: str | None = None

    def apply(self, args: argparse.Namespace) -> None:
        """Each value onto the option it stands for, as if given there."""
        for setting in SETTINGS:
            value = self.values[setting.key]
            setattr(
                args, setting.dest, list(value) if setting.key == "shipping.destinations" else value
            )

    def explain(self, message: str) -> str:
        """``message`` (which names options) naming the keys of the values the file gave, and
        beginning with the file's place of the first of them; a URL in it without its
        password (a Redis store's error names the store)."""
        message = _URL.sub(lambda found: _redacted(found.group(0)), message)
        if self.source is None:
            return message
        where: str | None = None

        def named(found: re.Match[str]) -> str:
            nonlocal where
            setting = _BY_OPTION.get(found.group(0))
            if setting is None or self.origins[setting.key] == setting.option:
                return found.group(0)
            if where is None:
                origin = self.origins[setting.key]
                where = self.source if origin == "default" else origin
            return f"$.{setting.key}"

        explained = _OPTION.sub(named, message)
        return f"{where or self.source}: {explained}"


_OPTION = re.compile(r"--[a-z][a-z-]*")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"]+")
_BY_OPTION = {setting.option: setting for setting in SETTINGS}


def resolve(args: argparse.Namespace, stdin: IO[str] | None = None) -> Effective:
    """The effective config of ``serve``'s ``args``: :class:`ServerConfigFileError` with every
    problem of the file or of a ``--set``."""
    effective = Effective()
    for setting in SETTINGS:
        effective.values[setting.key] = setting.default
        effective.origins[setting.key] = "default"
    if args.config is not None:
        _read_file(args.config, effective, stdin or sys.stdin)
    problems: list[Problem] = []
    for given in args.set:
        problems += _apply_set(given, effective)
    if problems:
        raise ServerConfigFileError(problems)
    for setting in SETTINGS:
        value = getattr(args, setting.dest, None)
        if value is not None:
            effective.values[setting.key] = tuple(value) if isinstance(value, list) else value
            effective.origins[setting.key] = setting.option
    return effective


def _read_file(path: str, effective: Effective, stdin: IO[str]) -> None:
    if path == "-":
        parsed, problems = parse_yaml(stdin.read(MAX_POLICY_BYTES + 1), "<stdin>")
        if parsed.built:
            problems += schema_problems(SCHEMA, parsed)
        folder = Path()
    else:
        found, problems = read_yaml_file(path, SCHEMA)
        parsed = found if found is not None else Parsed(None, path)
        folder = Path(path).parent
    if problems or not parsed.built:
        raise ServerConfigFileError(problems)
    effective.source = parsed.filename
    for setting in SETTINGS:
        section, name = setting.key.split(".")
        value = parsed.data.get(section, {}).get(name)
        if value is None:
            continue
        effective.values[setting.key] = _relative_to(folder, setting.kind, value)
        if isinstance(value, list):
            effective.values[setting.key] = tuple(value)
        line, column = parsed.values.get((section, name), (0, 0))
        effective.origins[setting.key] = f"{parsed.filename}:{line}:{column}"


def _relative_to(folder: Path, kind: str, value: Any) -> Any:
    """A path the file gives, read from the file's folder (an absolute path, a URL and a
    Redis store as they are)."""
    if kind == "path" or (kind == "source" and "://" not in value):
        return _joined(folder, value)
    if kind == "store" and value.startswith("sqlite:"):
        return "sqlite:" + _joined(folder, value.removeprefix("sqlite:"))
    if kind == "listen" and value.startswith("unix:"):
        return "unix:" + _joined(folder, value.removeprefix("unix:"))
    return value


def _joined(folder: Path, path: str) -> str:
    # Normalized as shown (a/b/../c as a/c): the printed config reads as the file meant it.
    return os.path.normpath(folder / path)


def _apply_set(given: str, effective: Effective) -> list[Problem]:
    key, sep, text = given.partition("=")
    shown = f"--set {key}"
    setting = BY_KEY.get(key)
    if not sep or setting is None:
        message = (
            "expected KEY=VALUE, KEY a dotted key of server-config.v1 (prunewarden schema "
            "server-config; e.g. limits.maxConnections)"
        )
        return [Problem(f"--set {given}", 0, 0, "$", message)]
    section, name = key.split(".")
    definition = schema_of(SCHEMA)["properties"][section]["properties"][name]
    value: Any = text
    if definition.get("type") != "string" and "enum" not in definition:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return [Problem(shown, 0, 0, f"$.{key}", f"{text!r} is not a YAML value")]
    document = {"configVersion": CONFIG_VERSION, section: {name: value}}
    errors = sorted(validator(SCHEMA).iter_errors(document), key=lambda e: e.message)
    if errors:
        return [Problem(shown, 0, 0, f"$.{key}", error.message) for error in errors]
    effective.values[key] = tuple(value) if isinstance(value, list) else value
    effective.origins[key] = shown
    return []


def print_config(effective: Effective, stdout: IO[str]) -> None:
    """The effective config as a server-config.v1 file: each value set, with where it came
    from as a comment; a password or token in a URL shown as ``***``."""
    stdout.write(f"configVersion: {CONFIG_VERSION}\n")
    section = ""
    for setting in SETTINGS:
        value = effective.values[setting.key]
        if value is None:
            continue
        here, name = setting.key.split(".")
        if here != section:
            stdout.write(f"{here}:\n")
            section = here
        if isinstance(value, tuple):
            value = [_redacted(item) for item in value]
        elif isinstance(value, str):
            value = _redacted(value)
        shown = json.dumps(value, ensure_ascii=False)
        stdout.write(f"  {name}: {shown}  # {effective.origins[setting.key]}\n")


_USERINFO_PASSWORD = re.compile(r"(//[^/:@\s]*):[^@/\s]*@")
_SECRET_QUERY = re.compile(r"(token|secret|password|passwd|key|signature|sig)", re.IGNORECASE)


def _redacted(value: str) -> str:
    """A URL without its password (``redis://:***@host``) and the values of query parameters
    that name a secret; any other string as it is."""
    if "://" not in value:
        return value
    try:
        parts = urllib.parse.urlsplit(value)
        password = parts.password
    except ValueError:  # not a URL urllib reads (a pattern such as HOST:PORT[,HOST:PORT]):
        return _USERINFO_PASSWORD.sub(r"\1:***@", value)  # still no password shown
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = parts.query
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if any(_SECRET_QUERY.search(name) for name, _ in pairs):
        hidden = [(name, "***" if _SECRET_QUERY.search(name) else item) for name, item in pairs]
        query = urllib.parse.urlencode(hidden, safe="*")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))
