"""The mutants shown equivalent: no test can tell them from the original code.

A mutant listed here is still run. When it survives, it is counted apart (``equivalent``) and
left out of its module's score, the classic mutation score: killed / (mutants - equivalent).
When a test kills it, it counts as killed and the run names it, so that a listing that no longer
holds is seen and removed. docs/dev/testing.md gives each one with its reason at more length.

An entry names its mutant without a line number, which moves with every edit above it: the
module, the text on the mutant's (first) line where its edit starts, and the edit as the runner
describes it.
``tests/mutation/test_runner.py`` checks that each entry still names a mutant of today's source.
"""

from __future__ import annotations

from dataclasses import dataclass

from mutation._operators import Mutant


@dataclass(frozen=True, slots=True)
class Equivalent:
    """``edit`` (``original -> replacement (operator)``) in ``module``, on the line that holds
    ``where``; ``why`` no test can tell it from the original."""

    module: str
    where: str
    edit: str
    why: str

    def names(self, mutant: Mutant, lines: list[str]) -> bool:
        """Whether this entry names ``mutant`` (of the source whose ``lines`` are given): its
        edit, starting within the text ``where`` on its line."""
        if mutant.path != self.module:
            return False
        if f"{mutant.original} -> {mutant.replacement} ({mutant.operator})" != self.edit:
            return False
        line, where = lines[mutant.line - 1].encode(), self.where.encode()  # columns count bytes
        start = line.find(where)
        return start >= 0 and start <= mutant.column < start + len(where)


def listed(mutant: Mutant, lines: list[str]) -> Equivalent | None:
    """The entry naming ``mutant``, if one does."""
    return next((entry for entry in EQUIVALENT if entry.names(mutant, lines)), None)


_APP = "prunewarden/server/_app.py"
_CALIBRATION = "prunewarden/pipeline/_calibration.py"
_COLLAPSE = "prunewarden/guards/collapse.py"
_COMPILE = "prunewarden/pipeline/_compile.py"
_CONFIG = "prunewarden/server/_config.py"
_EVICTION = "prunewarden/guards/eviction.py"
_EVALUATION = "prunewarden/rules/_evaluation.py"
_FIT = "prunewarden/replay/_fit.py"
_GUARDRAILS = "prunewarden/policy/_guardrails.py"
_HOLDING = "prunewarden/server/_holding.py"
_LOCK = "prunewarden/policy/_lock.py"
_SESSION = "prunewarden/session/_session.py"
_VERIFY = "prunewarden/audit/_verify.py"
_SESSIONS = "prunewarden/server/_sessions.py"
_STALENESS = "prunewarden/guards/staleness.py"
_PASSES = "prunewarden/engine/_passes.py"
_JSON = "prunewarden/_json.py"
_AFTER_ZERO = (
    "outside strings, orjson writes -0 only at the start or after a colon, a comma or a "
    "bracket: the test of what precedes it is true wherever it is asked"
)
_MEMBER_OFFSET = (
    'a member\'s value starts four bytes in at least ({"":): a bound of 3 or 4 lets the same '
    "numbers through"
)
_STATE = "prunewarden/session/_state.py"
_STORE = "prunewarden/session/_store.py"

_PLUS_ONE = "(number-plus-one)"
_TIMING = "a CPU budget: only timing a validator shows it"
_V2_WITH_COLUMNS = (
    "a version 2 record holding evictions decided over columns is written only beside"
    " a shadow policy, and the engine decides no eviction over columns beside one: unreachable"
)
_YAML_LAYOUT = "the layout of the written YAML (width, key order, escapes), not its content"

EQUIVALENT: tuple[Equivalent, ...] = (
    # server/_app.py
    Equivalent(_APP, "THREADS = 64", f"64 -> 65 {_PLUS_ONE}", "tuning: the worker threads"),
    Equivalent(_APP, "PROBE_THREADS = 2", f"2 -> 3 {_PLUS_ONE}", "tuning: the probe's threads"),
    Equivalent(
        _APP,
        "else 500",
        f"500 -> 501 {_PLUS_ONE}",
        "the handler is registered for HTTPException only: the else is unreachable",
    ),
    Equivalent(
        _APP,
        "ensure_ascii=False, separators",
        "False -> True (swap-bool)",
        "the same JSON document, with non-ASCII text escaped",
    ),
    Equivalent(
        _APP,
        "allow_nan=False",
        "False -> True (swap-bool)",
        "no answer holds a NaN or an infinity: its numbers are validated or finite",
    ),
    Equivalent(
        "prunewarden/server/_request_parts.py",
        "return False",
        "return False -> return None (return-none)",
        "query_explain without explain in the query: None is falsy, and every caller tests the "
        "truth of explain",
    ),
    # server/_config.py
    Equivalent(
        _CONFIG,
        "return False  # a host name",
        "return False -> return None (return-none)",
        "None is falsy where False was returned, and every caller tests its truth",
    ),
    # server/_sessions.py, server/_holding.py
    Equivalent(
        _SESSIONS,
        '{"cycle": 0, **data}',
        f"0 -> 1 {_PLUS_ONE}",
        "a placeholder cycle for the definition check: the schema takes any cycle >= 0",
    ),
    Equivalent(
        _SESSIONS,
        '{"turn": 0, **data}',
        f"0 -> 1 {_PLUS_ONE}",
        "a placeholder turn for the definition check: the schema takes any turn >= 0",
    ),
    Equivalent(
        _HOLDING,
        "self._used.pop(session_id, None)",
        "self._used.pop(session_id, None) -> pass (delete-call)",
        "a forgotten id's last use is overwritten by its next call before an expiry reads it",
    ),
    # pipeline/_calibration.py, pipeline/_compile.py
    Equivalent(
        _CALIBRATION,
        "return request  # pragma: no cover",
        "return request -> return None (return-none)",
        "unreachable: the four request types are all handled above it",
    ),
    Equivalent(
        _CALIBRATION,
        "isinstance(raw, EvictionRequest) and",
        "isinstance(raw, EvictionRequest) and isinstance(judged, EvictionRequest) -> "
        "(isinstance(raw, EvictionRequest) or isinstance(judged, EvictionRequest)) (swap-and-or)",
        "judged is calibrate(raw), a request of the same type: the two tests agree",
    ),
    Equivalent(
        _COMPILE,
        "compare=False",
        "False -> True (swap-bool)",
        "compare= of a field no code compares pipelines by",
    ),
    Equivalent(
        _COMPILE,
        '"consecutive_cycles", 1)',
        f"1 -> 2 {_PLUS_ONE}",
        "the default for settings without consecutive_cycles, read only for a collapse request",
    ),
    # rules/_evaluation.py
    Equivalent(
        _EVALUATION,
        "self.level += 1",
        f"1 -> 2 {_PLUS_ONE}",
        "level is read only by cel-python's debug log, to indent its lines",
    ),
    Equivalent(
        _EVALUATION,
        "self.level -= 1",
        f"1 -> 2 {_PLUS_ONE}",
        "level is read only by cel-python's debug log, to indent its lines",
    ),
    # guards/collapse.py, guards/eviction.py, guards/staleness.py
    Equivalent(
        _COLLAPSE,
        "if early else 0.0",
        f"0.0 -> 1.0 {_PLUS_ONE}",
        "the history is never empty here (too short a one returns earlier): unreachable",
    ),
    Equivalent(
        _COLLAPSE,
        "raise ValueError(msg)",
        "raise ValueError(msg) -> pass (delete-raise)",
        "unreachable: the cusum parameters are asked for only under the cusum mode, which has them",
    ),
    Equivalent(
        _COLLAPSE,
        "last.reference_cycles if last else 0",
        f"0 -> 1 {_PLUS_ONE}",
        "the detail is built only after the last cycle was judged, and a judged cycle is in the "
        "run: the run is never empty there",
    ),
    Equivalent(
        _COLLAPSE,
        "track.total < threshold",
        "track.total < threshold -> track.total <= threshold (boundary-compare)",
        "only the message of spread_healthy differs, and only for a sum exactly at the threshold "
        "after a cycle that did not add to it: the sum of logs never lands on it exactly",
    ),
    Equivalent(
        _VERIFY,
        "return False",
        "return False -> return None (return-none)",
        "_across_gap's one caller reads it as a condition: None is as false as False",
    ),
    Equivalent(
        _EVICTION,
        "depends and not candidates.isdisjoint(depends)",
        "depends and not candidates.isdisjoint(depends) -> (depends or not candidates.isdisjoint"
        "(depends)) (swap-and-or)",
        "a shortcut only (both columnar checks): with no dependencies `or` is False as `and` is; "
        "with some, it goes on to collect the pending ones among the candidates, and finds none "
        "exactly where isdisjoint said so",
    ),
    Equivalent(
        _EVICTION,
        "lo is None or hi is None",
        "lo is None or hi is None -> (lo is None and hi is None) (swap-and-or)",
        "neither end is ever None: score \u00b1 delta misses the stable interval by a rounding "
        "error at most, and the search moves up to 64 floats toward the score, which is in it",
    ),
    Equivalent(
        _STALENESS,
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of two slices of one length",
    ),
    Equivalent(
        _STALENESS,
        "rise > 0 and",
        "rise > 0 -> rise >= 0 (boundary-compare)",
        "with rise == 0 the next condition, rise > tolerance * |mean| (tolerance >= 0), is false",
    ),
    Equivalent(
        _STALENESS,
        "(True, 0.0)",
        f"0.0 -> 1.0 {_PLUS_ONE}",
        "the second key only orders unscored spans among themselves: they tie, the sort is stable",
    ),
    # session/_session.py, session/_state.py, session/_store.py
    Equivalent(
        _SESSION,
        "pending=True, decided",
        "True -> False (swap-bool)",
        "pending only matters to a concurrent reader between the decision and its save, both "
        "under the session's lock; the save that follows publishes again",
    ),
    Equivalent(
        _SESSION,
        '"keep_top_k": 0, "turns"',
        f"0 -> 1 {_PLUS_ONE}",
        "the staleness document built there is parsed only for its turn",
    ),
    Equivalent(
        _STATE,
        "len(updated) > limit",
        "len(updated) > limit -> len(updated) >= limit (boundary-compare)",
        "at the limit the slice [: len(updated) - limit] is empty either way",
    ),
    Equivalent(
        _STATE,
        "basis is None or parameters is None",
        "basis is None or parameters is None -> (basis is None and parameters is None) "
        "(swap-and-or)",
        "both are None exactly when the policy has no cusum spread test",
    ),
    Equivalent(
        _STORE,
        "BUSY_TIMEOUT = 30.0",
        f"30.0 -> 31.0 {_PLUS_ONE}",
        "how long SQLite waits for a busy file: only timing a contended write shows it",
    ),
    # replay/_fit.py
    Equivalent(
        _FIT,
        "_document(base, base_ref, scale, 0.0, {}",
        f"0.0 -> 1.0 {_PLUS_ONE}",
        "the floor of the cusum fit's provisional document, which states cusum settings instead",
    ),
    Equivalent(
        _FIT,
        "_document(base, base_ref, scale, 0.0, metadata",
        f"0.0 -> 1.0 {_PLUS_ONE}",
        "the floor of the cusum fit's final document, which states cusum settings instead",
    ),
    Equivalent(
        _FIT,
        "{0.0, 1.0}",
        f"0.0 -> 1.0 {_PLUS_ONE}",
        "a floor at or below every healthy spread halts no more than 0 does: the search starts "
        "from a quiet floor either way",
    ),
    Equivalent(
        _FIT,
        "(lo + hi + 1) // 2",
        f"1 -> 2 {_PLUS_ONE}",
        "(lo + hi + 2) // 2 still lies in (lo, hi]: the bisection over a monotone quiet ends on "
        "the same candidate",
    ),
    Equivalent(_FIT, "sort_keys=False", "False -> True (swap-bool)", _YAML_LAYOUT),
    Equivalent(_FIT, "allow_unicode=True", "True -> False (swap-bool)", _YAML_LAYOUT),
    Equivalent(_FIT, "width=100", f"100 -> 101 {_PLUS_ONE}", _YAML_LAYOUT),
    # policy/_lock.py, policy/_guardrails.py
    Equivalent(
        _LOCK,
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of three tuples of one length (one per layer)",
    ),
    Equivalent(_GUARDRAILS, "VALIDATOR_TIMEOUT = 0.5", f"0.5 -> 1.5 {_PLUS_ONE}", _TIMING),
    Equivalent(_GUARDRAILS, "MAX_DECISION_RULE_MS / 1000", f"1000 -> 1001 {_PLUS_ONE}", _TIMING),
    Equivalent(
        _GUARDRAILS,
        'Origin("", 0, 0)',
        f"0 -> 1 {_PLUS_ONE}",
        "every spec.locked entry of a merged document was read from a file that recorded its "
        "origin: the fallback is never used",
    ),
    Equivalent(
        _GUARDRAILS,
        "isinstance(rule, dict) and",
        'isinstance(rule, dict) and isinstance(rule.get("name"), str) -> (isinstance(rule, '
        "dict) or isinstance(rule.get('name'), str)) (swap-and-or)",
        "locks are implied on a schema-valid policy, where every rule is a map with a name",
    ),
    Equivalent(
        _GUARDRAILS,
        "len(tokens) <= 2 and",
        f"2 -> 3 {_PLUS_ONE}",
        '("spec", "rules")[:3] has two items: a three-token pointer never equals it',
    ),
    Equivalent(
        _GUARDRAILS,
        "range(size - 1",
        "size - 1 -> (size + 1) (swap-add-sub)",
        "the extra steps look up the target itself, which the layer did not set",
    ),
    Equivalent(
        _GUARDRAILS,
        ", 0, -1)",
        f"0 -> 1 {_PLUS_ONE}",
        "the search stops before spec, whose origin is always the root file's",
    ),
    Equivalent(
        _GUARDRAILS,
        "0, -1):",
        f"1 -> 2 {_PLUS_ONE}",
        "the step: the lists an overlay can replace hold scalars, so the value a layer set "
        "above a locked path is its parent, found on the first step either way",
    ),
    Equivalent(
        _GUARDRAILS,
        "), -1,",
        f"1 -> 2 {_PLUS_ONE}",
        "the stop of nearest: the extra path[:-1] looked up is one already looked up",
    ),
    # pipeline/_columns.py, engine/_passes.py, planner/_log.py
    Equivalent(
        "prunewarden/pipeline/_columns.py",
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of a result's segment ids and allowed flags, which the engine always "
        "builds one per segment",
    ),
    Equivalent(
        "prunewarden/pipeline/_columns.py",
        "range(1 << len(CODES))",
        f"1 -> 2 {_PLUS_ONE}",
        "the table of every bitmask's codes made twice as long: the masks of the guard's six "
        "codes never read past its first 64 entries",
    ),
    Equivalent(
        _PASSES,
        "stamps.pass_id, 0,",
        f"0 -> 1 {_PLUS_ONE}",
        "ColumnarEviction.decide reads the stamp's pass id and time only: each decision's index "
        "is its place in the pass",
    ),
    Equivalent(
        _PASSES,
        "return False",
        "return False -> return None (return-none)",
        "_gated's one caller reads it as a condition: None is as false as False",
    ),
    Equivalent(
        "prunewarden/planner/_log.py",
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of a pass log's decisions and requests, which add and add_deferred "
        "append together",
    ),
    Equivalent(
        "prunewarden/planner/_log.py",
        "built.insert(0, self.decisions[0])",
        "built.insert(0, self.decisions[0]) -> pass (delete-call)",
        _V2_WITH_COLUMNS,
    ),
    Equivalent(
        "prunewarden/planner/_log.py",
        "built.insert(0, self.decisions[0])",
        f"0 -> 1 {_PLUS_ONE}",
        _V2_WITH_COLUMNS,
    ),
    # audit/_columns.py, audit/_pass.py
    Equivalent(
        "prunewarden/audit/_columns.py",
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of a record's segments and column_indices, which gives one place per "
        "segment",
    ),
    Equivalent(
        "prunewarden/audit/_pass.py",
        "strict=True",
        "True -> False (swap-bool)",
        "strict= of a zip of a pass's decisions and requests, which every caller gives one for one",
    ),
    # _json.py: the fast path's tests only choose between orjson's bytes and the exact writer's,
    # which are the same bytes wherever the fast path takes orjson's
    Equivalent(
        _JSON,
        "_KEY_END = 3",
        f"3 -> 4 {_PLUS_ONE}",
        _MEMBER_OFFSET,
    ),
    Equivalent(
        _JSON,
        "not encoded.isascii() and",
        'not encoded.isascii() and re.search(rb"[\\xf0-\\xf4]", encoded) -> (not encoded.'
        "isascii() or re.search(b'[\\\\xf0-\\\\xf4]', encoded)) (swap-and-or)",
        "every text beyond ASCII goes to the exact writer: the same bytes, slower",
    ),
    Equivalent(
        _JSON,
        'b"+" in encoded and',
        "b\"+\" in encoded and _POSITIVE_EXPONENT.search(encoded) -> (b'+' in encoded or "
        "_POSITIVE_EXPONENT.search(encoded)) (swap-and-or)",
        "every output with a + goes to the exact writer: the same bytes, slower",
    ),
    Equivalent(
        _JSON,
        "max(magnitudes) < 1e16",
        "max(magnitudes) < 1e16 -> max(magnitudes) <= 1e+16 (boundary-compare)",
        "every double from 2**52 up is integral, and is_integer answers for it first",
    ),
    Equivalent(
        _JSON,
        "< 1e16",
        f"1e16 -> 1e+16 {_PLUS_ONE}",
        "1e16 + 1 is 1e16 as a double: the same bound",
    ),
    Equivalent(
        _JSON,
        "begin < _KEY_END",
        "begin < _KEY_END -> begin <= _KEY_END (boundary-compare)",
        _MEMBER_OFFSET,
    ),
    Equivalent(
        _JSON,
        "while begin > 0",
        "begin > 0 -> begin >= 0 (boundary-compare)",
        "the digits reach the start only for a number at the top or first in a list, which the "
        "key's bound then leaves to the count of quotes either way",
    ),
    Equivalent(
        _JSON,
        "while begin > 0",
        f"0 -> 1 {_PLUS_ONE}",
        "a number starting at 1 is first in a list, which the key's bound leaves to the count "
        "of quotes either way",
    ),
    Equivalent(
        _JSON,
        "start == 2 or encoded[start - 3 : start - 2]",
        "start == 2 -> start != 2 (flip-compare)",
        _AFTER_ZERO,
    ),
    Equivalent(
        _JSON, "start == 2 or encoded[start - 3 : start - 2]", f"2 -> 3 {_PLUS_ONE}", _AFTER_ZERO
    ),
    Equivalent(
        _JSON,
        "start == 2 or encoded[start - 3 : start - 2]",
        "start - 3 -> (start + 3) (swap-add-sub)",
        _AFTER_ZERO,
    ),
    Equivalent(
        _JSON,
        "quoted.isascii() or not",
        "quoted.isascii() or not _SURROGATE.search(quoted) -> (quoted.isascii() and (not "
        "_SURROGATE.search(quoted))) (swap-and-or)",
        "a string with no lone surrogate goes through the substitution, which finds none: the "
        "same text, slower",
    ),
    Equivalent(
        _JSON,
        '"-" if number < 0',
        "number < 0 -> number <= 0 (boundary-compare)",
        "a zero was written 0 two lines above: no number here equals 0",
    ),
    Equivalent(
        _JSON,
        "-6 < point <= 0",
        f"0 -> 1 {_PLUS_ONE}",
        "a point of 1 was written by the branch above (0 < point <= 21)",
    ),
)
