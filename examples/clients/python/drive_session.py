"""Drives one session through a running ``prunewarden serve`` with prunewarden.client.

    python examples/clients/python/drive_session.py URL [SESSION_ID]

The same steps as examples/clients/node/drive-session.mjs: healthy cycles, an eviction, a
collapse, the eviction refused while pruning is halted, a cycle out of order (HTTP 409, the
located problem raised as InputError), and an edit of the window refused while halted. The
token, if the server asks one, comes from ``PRUNEWARDEN_TOKEN``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from prunewarden import InputError
from prunewarden.client import Client, DecisionDocument

SEGMENT = {"id": "tool-42", "kind": "tool_output", "tombstone_written": True}
CYCLES = [
    {"c": 0.9, "a": 0.6, "b": 0.1},
    {"c": 0.88, "a": 0.55, "b": 0.12},
    {"c": 0.3, "a": 0.31, "b": 0.3},
    {"c": 0.3, "a": 0.31, "b": 0.3},
]


def say(step: str, decision: DecisionDocument) -> None:
    codes = ",".join(reason["code"] for reason in decision["reasons"]) or "-"
    print(f"{step}: {decision['check']} {decision['outcome']} {codes}")


def main(url: str, session_id: str = "python-agent") -> None:
    with Client(url, token=os.environ.get("PRUNEWARDEN_TOKEN") or None) as client:
        policy = client.policy()["policy"]
        print(f"policy: {policy['name']}@{policy['version']}")
        session = client.session(session_id)
        say("cycle 1", session.observe_cycle(CYCLES[0], ["c"]))
        say("cycle 2", session.observe_cycle(CYCLES[1], ["c"]))
        say("evict tool-42", session.authorize(SEGMENT, 0.1, 0.12))
        say("cycle 3", session.observe_cycle(CYCLES[2], ["c"]))
        say("cycle 4", session.observe_cycle(CYCLES[3], ["c"]))
        say("evict tool-42", session.authorize(SEGMENT, 0.1, 0.12))
        print(f"state: halted={str(session.state()['halted']).lower()}")
        try:
            session.observe_cycle(CYCLES[3], ["c"], cycle=1)
        except InputError as exc:
            print(f"cycle 1 again: HTTP 409 {exc.problems[0]}")
        # An edit made by other code, judged from before and after: refused while halted.
        before: list[dict[str, Any]] = [SEGMENT, {"id": "tool-43", "kind": "tool_output"}]
        say("trim tool-42", session.verify(before, before[1:], tombstones=["tool-42"]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: drive_session.py URL [SESSION_ID]")
    main(*sys.argv[1:3])
