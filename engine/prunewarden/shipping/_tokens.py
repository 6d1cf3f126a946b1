"""What ``audit collect --tokens FILE`` reads: bearer tokens, each bound to one replica.

With one shared token (``--token-file``) any sender holding it may ship as any replica, and so
extend any replica's chain. A tokens file binds each token to the replica it may ship as: a
batch naming another replica is refused (403 ``forbidden-replica``). The file is YAML checked
against ``collect-tokens.v1.schema.json``, read as the tenants and lock files are; every problem
is located (``tokens.yaml:6:9: $.replicas[1].tokens[0]: ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from prunewarden._schemas import read_yaml_file
from prunewarden.errors import ExitCode, ProblemsError


class TokensError(ProblemsError):
    """A tokens file that cannot be used: unreadable, not valid against its schema, a replica
    named twice, or one token given to two replicas."""

    exit_code = ExitCode.USAGE


def read_collect_tokens(path: str | os.PathLike[str]) -> Mapping[str, str]:
    """Each token of the file at ``path`` and the replica it is bound to;
    :class:`TokensError` with every located problem."""
    parsed, problems = read_yaml_file(path, "collect-tokens")
    if parsed is None or problems:
        raise TokensError(problems)
    data: dict[str, Any] = parsed.data
    bound: dict[str, str] = {}
    names: set[str] = set()
    for index, entry in enumerate(data["replicas"]):
        if entry["name"] in names:
            message = f"{entry['name']!r}: a replica named twice"
            problems.append(parsed.problem(("replicas", index, "name"), message))
        names.add(entry["name"])
        for number, token in enumerate(entry["tokens"]):
            other = bound.setdefault(token, entry["name"])
            if other != entry["name"]:
                message = f"this token is also replica {other!r}'s: a token is one replica's"
                problems.append(parsed.problem(("replicas", index, "tokens", number), message))
    if problems:
        raise TokensError(problems)
    return bound
