"""``prunewarden status URL...``: ``GET /v1/status`` of each server of a fleet, one line each
and a summary line (docs/fleet.md).

HTTP goes through the standard library, so the command needs no extra. Every server is asked at
once, each in a daemon thread of its own, and each within ``--timeout``: the command answers
when the last has answered or its deadline has passed, so a fleet takes as long as its slowest
server, bounded by the deadline, not the sum. One that does not answer is a line saying why.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import IO, Any

from prunewarden.cli._common import UsageError
from prunewarden.errors import ExitCode

TOKEN_ENV = "PRUNEWARDEN_TOKEN"  # noqa: S105 - the name of the variable, not a token
# What became of each server, as the summary line counts them, in its order.
OUTCOMES = ("healthy", "unhealthy", "failed", "unreachable", "timed out")
STATUS_EXIT_CODES = """\
exit codes:
  0   every server answered and is healthy (its last reload or bundle fetch succeeded)
  1   a server did not answer (unreachable, timed out), answered an error (failed), or
      answered that its last reload or fetch failed (unhealthy)
  2   usage error: an address that is not http(s)://, a token file that cannot be read
"""


def add_status(commands: Any) -> None:
    status = commands.add_parser(
        "status",
        help="print the status of each server of a fleet "
        "(tenants, bundle, decisions, shipping, errors)",
        epilog=STATUS_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("urls", nargs="+", metavar="URL", help="a server, http(s)://HOST:PORT")
    status.add_argument(
        "--token-file", metavar="FILE", help=f"the bearer token (else ${TOKEN_ENV})"
    )
    status.add_argument(
        "--timeout",
        type=_positive,
        default=5.0,
        metavar="SECONDS",
        help="the deadline of each server, all asked at once (default 5)",
    )
    status.add_argument("--format", choices=["text", "json"], default="text")


def run_status(args: argparse.Namespace, stdout: IO[str], _stderr: IO[str]) -> int:
    for url in args.urls:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"prunewarden status: {url!r} is not an http(s):// address")
    token = _token(args.token_file)
    answers = ask_all([url.rstrip("/") for url in args.urls], token, args.timeout)
    if args.format == "json":
        stdout.write(json.dumps(answers, indent=2) + "\n")
    else:
        stdout.writelines(_line(answer) + "\n" for answer in answers)
        stdout.write(summary(answers) + "\n")
    healthy = all(answer["outcome"] == "healthy" for answer in answers)
    return ExitCode.OK if healthy else ExitCode.REFUSED


def summary(answers: list[dict[str, Any]]) -> str:
    """``3 servers: 2 healthy, 1 unreachable``: healthy always, the other outcomes when any."""
    counts = Counter(answer["outcome"] for answer in answers)
    told = [f"{counts[o]} {o}" for o in OUTCOMES if o == "healthy" or counts[o]]
    noun = "server" if len(answers) == 1 else "servers"
    return f"{len(answers)} {noun}: {', '.join(told)}"


def ask_all(urls: list[str], token: str | None, timeout: float) -> list[dict[str, Any]]:
    """Every server's answer (:func:`_ask`), in the order of ``urls``, all asked at once; one
    not done within ``timeout`` of the start is ``timed out`` (its thread, a daemon, is left
    to its socket's own timeout)."""
    answers: list[dict[str, Any] | None] = [None] * len(urls)
    done = [threading.Event() for _ in urls]

    def ask(index: int) -> None:
        answers[index] = _ask(urls[index], token, timeout)
        done[index].set()

    deadline = time.monotonic() + timeout
    for index in range(len(urls)):
        threading.Thread(target=ask, args=(index,), daemon=True, name="prunewarden-status").start()
    for event in done:
        event.wait(max(0.0, deadline - time.monotonic()))
    return [
        answer if event.is_set() and answer is not None else _timed_out(url, timeout)
        for url, answer, event in zip(urls, answers, done, strict=True)
    ]


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _token(token_file: str | None) -> str | None:
    if token_file is None:
        return os.environ.get(TOKEN_ENV, "").strip() or None
    try:
        return Path(token_file).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"prunewarden status: --token-file {token_file}: {exc}") from None


def _ask(url: str, token: str | None, timeout: float) -> dict[str, Any]:
    """``{"url", "outcome", "status", "error"}``: the status document, or why there is none."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url + "/v1/status", headers=headers)  # noqa: S310 - http(s) only
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - as above
            document = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return _failed(url, "failed", f"HTTP {exc.code} {exc.reason}")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, TimeoutError):
            return _timed_out(url, timeout)
        return _failed(url, "unreachable", f"no answer: {reason}")
    if not isinstance(document, dict) or "healthy" not in document:
        return _failed(url, "failed", "not a prunewarden status document")
    outcome = "healthy" if document["healthy"] is True else "unhealthy"
    return {"url": url, "outcome": outcome, "status": document, "error": None}


def _failed(url: str, outcome: str, error: str) -> dict[str, Any]:
    return {"url": url, "outcome": outcome, "status": None, "error": error}


def _timed_out(url: str, timeout: float) -> dict[str, Any]:
    return _failed(url, "timed out", f"no answer: timed out after {timeout:g} s")


def _line(answer: dict[str, Any]) -> str:
    status = answer["status"]
    if status is None:
        return f"{answer['url']}  {answer['error']}"
    tenants = status.get("tenants") or []
    where = _tenants(status, tenants) if len(tenants) > 1 else _policy(status)
    counts = " ".join(f"{k} {v}" for k, v in status["decisions"].items())
    line = f"{answer['url']}  {'healthy' if status['healthy'] else 'unhealthy'}  {where}  {counts}"
    shipping = status.get("log_shipping")
    if shipping is not None:
        line += "  " + "; ".join(_shipped(d) for d in shipping["destinations"])
    line += f"  since {status['activated_at']}"
    if not status["healthy"]:
        line += f"  last reload failed: {'; '.join(_problems(status, tenants))}"
    return line


def _policy(status: dict[str, Any]) -> str:
    """A server of one policy: ``name@version``, its bundle revision and its shadow."""
    policy = status["policy"]
    revision = policy.get("bundle_revision")
    where = _named(policy) + (f" bundle {revision}" if revision else "")
    shadow = status.get("shadow")
    if shadow is not None:
        where += f" shadow {_named(shadow)}"
    return where


def _tenants(status: dict[str, Any], tenants: list[dict[str, Any]]) -> str:
    """A server of several tenants: the bundle revision, then each tenant's policy (and
    shadow, and health when it is not), as ``serve`` names them when it starts."""
    bundle = status.get("bundle")
    where = f"bundle {bundle['revision']}  " if bundle is not None else ""
    held = []
    for tenant in tenants:
        text = f"{tenant['name']} {_named(tenant['policy'])}"
        if tenant.get("shadow") is not None:
            text += f" shadow {_named(tenant['shadow'])}"
        if tenant.get("healthy") is False:
            text += " (unhealthy)"
        held.append(text)
    return f"{where}tenants {', '.join(held)}; default {status.get('default_tenant')}"


def _named(identity: dict[str, Any]) -> str:
    return f"{identity['name']}@{identity['version']}"


def _shipped(destination: dict[str, Any]) -> str:
    return (
        f"ship {destination['destination']} shipped {destination['shipped']} "
        f"dropped {destination['dropped']}"
    )


def _problems(status: dict[str, Any], tenants: list[dict[str, Any]]) -> list[str]:
    """What failed: each unhealthy tenant's problems once (one bundle failing fails them
    all alike), else the last reload's."""
    found: list[str] = []
    for tenant in tenants:
        if tenant.get("healthy") is False:
            found.extend(p for p in tenant.get("problems", ()) if p not in found)
    return found or list(status["last_reload"]["problems"])
