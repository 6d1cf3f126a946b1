"""``prunewarden hook claude-code|codex``: one run for one hook event, its JSON on standard input.

``PreCompact`` records the window about to be compacted in a state file beside the audit log,
keyed by session, and blocks the compaction where ``spec.compaction`` says so (Claude Code: exit
2 with the reason on stderr; Codex: ``{"continue": false, "stopReason": ...}`` on stdout, exit
0). ``PostCompact`` (whose input holds ``compact_summary``) or ``SessionStart`` with ``source:
compact`` (the summary read from the transcript) judges the compaction as a transition, and a
refusal is repaired by ``SessionStart``'s ``additionalContext``: the lost pinned text, verbatim,
after a notice naming the decision.

Every run writes one chained record, an error's too: an error is one line on stderr, never a
traceback, recorded as ``internal_error`` (enforced when it blocks); ``--on-error``, else
``spec.compaction.on_error``, says whether it blocks (exit 2, or Codex's stop at ``PreCompact``)
or warns (exit 0). A record that cannot be written is the fail-closed exit, whatever
``on_error`` says: a run nobody can audit must not pass as an allow.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from prunewarden.audit import AuditLog
from prunewarden.cli import _hook_files as files
from prunewarden.cli._common import EXIT_CODES
from prunewarden.decision import Reason
from prunewarden.engine import Engine
from prunewarden.errors import AuditError, ExitCode, PrunewardenError
from prunewarden.integrations import claude_code, compaction_gate
from prunewarden.policy import Policy, load_builtin_policy
from prunewarden.session import SqliteSessionStore

HOOK_HELP = "run as a coding agent's compaction hook (claude-code, codex): record, judge, restore"
COMPACT_EVENTS = {"PreCompact", "PostCompact", "SessionStart"}


class HookError(PrunewardenError):
    """Something a hook run could not do: reported on one line, decided by ``on_error``."""


class UnrecordedError(Exception):
    """The run's record could not be written: the fail-closed exit."""


def add_hook(commands: Any) -> None:
    hook = commands.add_parser(
        "hook",
        help=HOOK_HELP,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agents = hook.add_subparsers(dest="agent", required=True, metavar="AGENT")
    for agent, events in (
        ("claude-code", "Claude Code's PreCompact, PostCompact, SessionStart"),
        ("codex", "Codex's PreCompact, PostCompact, SessionStart"),
    ):
        parser = agents.add_parser(agent, help=events)
        parser.add_argument(
            "--policy", metavar="FILE", help="policy YAML (default: the bundled one)"
        )
        parser.add_argument(
            "--audit-log",
            metavar="FILE",
            help="the audit log (default: .prunewarden/audit.jsonl under the hook's cwd)",
        )
        parser.add_argument(
            "--session-store",
            metavar="FILE",
            help="the SQLite session store whose collapse halts compaction.block_manual reads",
        )
        parser.add_argument(
            "--on-error",
            choices=["block", "warn"],
            help="after an error: block (exit 2) or warn (exit 0); default: the policy's "
            "spec.compaction.on_error (block a manual compaction, warn on an automatic one)",
        )
        parser.add_argument(
            "--preview",
            metavar="TRANSCRIPT",
            help="judge the last compaction of TRANSCRIPT and show, per pinned parent, the "
            "facts kept, restated and lost; records nothing",
        )
        parser.add_argument(
            "--format", choices=["text", "json"], default="text", help="the preview's format"
        )


def run_hook(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    if args.preview:
        from_files = files.Settings(args, {})
        return files.preview(args, from_files.policy(), stdout)
    return _Run(args, stdout, stderr).main(sys.stdin)


class _Run:
    """One hook run: what it read so far, so that an error is recorded with what is known."""

    def __init__(self, args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> None:
        self.args, self.stdout, self.stderr = args, stdout, stderr
        self.read, self.applied = files.READERS[args.agent]
        self.data: dict[str, Any] = {}
        self.settings = files.Settings(args, {})
        self.policy: Policy | None = None
        self.segments = 0

    @property
    def event(self) -> str:
        return str(self.data.get("hook_event_name") or "hook")

    @property
    def trigger(self) -> str:
        return "manual" if self.data.get("trigger") == "manual" else "auto"

    @property
    def applied_by(self) -> str:
        return f"{self.applied}:{self.trigger}"

    def main(self, stdin: IO[str]) -> int:  # noqa: PLR0911 - one exit per way a run ends
        try:
            self.data = files.hook_input(stdin.read())
            if self.event not in COMPACT_EVENTS or (
                self.event == "SessionStart" and self.data.get("source") != "compact"
            ):
                return ExitCode.OK  # not a compaction's event: nothing to do, nothing recorded
            self.settings = files.Settings(self.args, files.project(self.data))
            self.policy = self.settings.policy()
            if self.event == "PreCompact":
                return self._pre_compact(self.policy)
            return self._after_compaction(self.policy)
        except UnrecordedError as exc:
            return self._unrecorded(str(exc))
        except (PrunewardenError, OSError, ValueError, KeyError, TypeError) as exc:
            return self._failed(str(exc) or type(exc).__name__)
        except compaction_gate.ConditionError as exc:
            return self._failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - a hook never shows a traceback; fail as told
            return self._failed(f"internal error: {type(exc).__name__}: {exc}")

    # --- the events ---------------------------------------------------------------------------

    def _pre_compact(self, policy: Policy) -> int:
        transcript = self.read(files.transcript_path(self.data))
        window = claude_code.transcript_window(transcript, policy)
        self.segments = len(window)
        variables = compaction_gate.gate_variables(
            window,
            policy,
            self.data,
            self.args.agent,
            window=policy.spec.compaction.block_when is not None,
        )
        reason = compaction_gate.blocking_reason(policy, variables, self._halt(policy))
        enforced = policy.spec.transition.mode == "enforce"
        if reason is not None:
            self._record("deny", enforced, reason)
            if enforced:
                return self._block(reason.message)
            return ExitCode.OK
        state_path = self.settings.state_path(self.data)
        state = files.read_state(state_path)
        state[self.data["session_id"]] = {
            "trigger": self.trigger,
            "window": claude_code.recorded_window(window, policy),
            "judged": None,
        }
        files.write_state(state_path, state)
        pinned = variables["compaction"]["pinned"]
        message = f"the window about to be compacted was recorded ({pinned} pinned)"
        detail = {"segments": self.segments, "pinned": pinned, "trigger": self.trigger}
        self._record("allow", True, Reason(compaction_gate.RECORDED, message, detail))
        return ExitCode.OK

    def _after_compaction(self, policy: Policy) -> int:
        session = self.data["session_id"]
        state_path = self.settings.state_path(self.data)
        state = files.read_state(state_path)
        entry = state.get(session)
        if not isinstance(entry, dict):
            raise HookError(f"no window was recorded at PreCompact for session {session}")
        self.data.setdefault("trigger", entry.get("trigger", "auto"))
        self.segments = len(entry["window"])
        judged = entry.get("judged")
        if judged is None:
            judged = entry["judged"] = self._judge(entry, policy)
            files.write_state(state_path, state)
        else:
            restored = list(judged.get("restored", []))
            message = (
                f"the repair of compaction decision {judged['decision']} was given again"
                if restored
                else f"compaction decision {judged['decision']} needs no repair"
            )
            detail = {"decision": judged["decision"], "restored": restored, "event": self.event}
            self._record("allow", True, Reason(compaction_gate.RESTORED, message, detail))
        context = str(judged["context"])
        if self.event == "SessionStart" and context:
            output = {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": context,
                }
            }
            self.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
        return ExitCode.OK

    def _judge(self, entry: dict[str, Any], policy: Policy) -> dict[str, Any]:
        """The compaction judged (the engine writes its record) and the context its repair
        adds."""
        summary = self.data.get("compact_summary")
        if not isinstance(summary, str):
            summary = self.read(files.transcript_path(self.data)).summary
        if summary is None:
            raise HookError(
                "no compaction summary: neither compact_summary nor one in the transcript"
            )
        before = entry["window"]
        after, tombstones = claude_code.compaction_transition(before, summary, policy)
        audit = self._audit()
        try:
            store_path = self.settings.session_store()
            store = SqliteSessionStore(store_path) if store_path is not None else None
            try:
                session = Engine(policy, audit=audit).session(self.data["session_id"], store=store)
                decision = session.verify(
                    before, after, tombstones=tombstones, applied_by=self.applied_by
                )
            finally:
                if store is not None:
                    store.close()
        finally:
            audit.close()
        if "audit_unavailable" in decision.codes:
            raise UnrecordedError(decision.reasons[0].message)
        lost = claude_code.lost_ids(decision) if decision.blocks else []
        context = claude_code.restoration(decision, before) if decision.blocks else ""
        return {
            "decision": decision.decision_id,
            "outcome": decision.outcome,
            "restored": lost,
            "context": context,
        }

    def _halt(self, policy: Policy) -> Any:
        """The session's halt in its store, when ``block_manual`` may read one."""
        store_path = self.settings.session_store()
        if not policy.spec.compaction.block_manual or store_path is None:
            return None
        with SqliteSessionStore(store_path) as store:
            return Engine(policy).session(self.data["session_id"], store=store).halt

    # --- blocking, records and errors ---------------------------------------------------------

    def _block(self, message: str) -> int:
        """Block the compaction (or report a blocking error after one) as the agent reads it."""
        if self.args.agent == "codex" and self.event == "PreCompact":
            stop = {"continue": False, "stopReason": f"prunewarden: {message}"}
            self.stdout.write(json.dumps(stop, ensure_ascii=False) + "\n")
            self.stderr.write(f"prunewarden hook codex: PreCompact: {message}\n")
            return ExitCode.OK
        self.stderr.write(f"prunewarden hook {self.args.agent}: {self.event}: {message}\n")
        return ExitCode.USAGE

    def _audit(self) -> AuditLog:
        path = self.settings.audit_path(self.data)
        path.parent.mkdir(parents=True, exist_ok=True)
        audit = AuditLog(path)
        audit.open()
        return audit

    def _record(self, outcome: compaction_gate.Outcome, enforced: bool, reason: Reason) -> None:
        """Write this run's one record; :class:`UnrecordedError` when it cannot be written."""
        policy = self.policy if self.policy is not None else load_builtin_policy()
        _, record = compaction_gate.hook_record(
            policy,
            self.data,
            outcome=outcome,
            enforced=enforced,
            reason=reason,
            segments=self.segments,
            applied_by=self.applied_by,
        )
        try:
            audit = self._audit()
            try:
                audit.add_policy(policy)
                audit.write(record)
            finally:
                audit.close()
        except (AuditError, OSError) as exc:
            raise UnrecordedError(f"the audit log cannot be written: {exc}") from None

    def _failed(self, message: str) -> int:
        mode = self.args.on_error
        if mode is None:
            policy = self.policy
            mode = policy.spec.compaction.on_error(self.trigger) if policy else None
        if mode is None:
            mode = "block" if self.trigger == "manual" else "warn"
        detail = {"error": message[:1000], "event": self.event, "on_error": mode}
        reason = Reason(compaction_gate.HOOK_ERROR, f"the hook failed: {message}", detail)
        try:
            self._record("deny", mode == "block", reason)
        except UnrecordedError as exc:
            return self._unrecorded(f"{message}; {exc}")
        except Exception as exc:  # noqa: BLE001 - the error's record failed: fail closed
            return self._unrecorded(f"{message}; its record failed: {type(exc).__name__}")
        line = f"{message} (on error: {mode})"
        if mode == "block":
            return self._block(line)
        self.stderr.write(f"prunewarden hook {self.args.agent}: {self.event}: {line}\n")
        return ExitCode.OK

    def _unrecorded(self, message: str) -> int:
        """Nothing could be recorded: one line, and the fail-closed exit."""
        return self._block(f"{message} (not recorded: failing closed)")
