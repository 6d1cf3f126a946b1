"""Measure the fidelity check on the labelled pairs: recall on lossy summaries, false refusals on
faithful ones, for the facts method alone and for facts and meaning together; and the facts
method's time per pair on a 2,000-token parent and a 300-token summary.

    python -m benchmarks.fidelity [--rate 0.05] [--out PATH]

The meaning method's floor is fitted as ``prunewarden calibrate --fidelity`` fits it (the largest
floor refusing at most ``--rate`` of the faithful pairs, rounded down to 0.01) on the pairs of
half the conversations, and every number is reported on the pairs of the other half (held out),
besides the facts method on all pairs. Needs the ``embed`` extra (MiniLM, offline).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from prunewarden.fidelity import FidelitySettings, check_fidelity
from prunewarden.fidelity._check import clear_parent_facts
from prunewarden.replay._fit_fidelity import (
    FidelityPair,
    largest_quiet_floor,
    read_pairs,
    similarities,
)
from prunewarden.scoring.embed import MiniLMEmbedder

from benchmarks.fidelity.generate import PAIRS
from benchmarks.fidelity.sources import conversations

RESULTS = Path(__file__).resolve().parents[1] / "results" / "fidelity.json"
RATE = 0.05
# Issue 27's targets: (least share of lossy pairs refused, most share of faithful pairs refused).
TARGETS = {"facts": (0.90, 0.10), "facts+embedding": (0.95, 0.05)}
CURVE = tuple(round(0.30 + 0.05 * n, 2) for n in range(12))  # floors 0.30 .. 0.85
PARENT_TOKENS, SUMMARY_TOKENS = 2_000, 300
# Issue 27: the facts method on that pair "well under a millisecond".
FACTS_TARGET_MS = 1.0
_TOKEN = re.compile(r"\w+|[^\w\s]")


def held_out_sources() -> frozenset[str]:
    """Every other conversation, in the order of the sources: the floor never sees them."""
    return frozenset(list(conversations())[1::2])


def refused_by_facts(pairs: Sequence[FidelityPair]) -> list[bool]:
    settings = FidelitySettings(method="facts")
    return [check_fidelity(p.parents, ("summary", p.summary), settings).refused for p in pairs]


def rates(pairs: Sequence[FidelityPair], refused: Sequence[bool]) -> dict[str, Any]:
    """Refused over total, by label and by class."""
    by_label: Counter[str] = Counter()
    by_class: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for pair, no in zip(pairs, refused, strict=True):
        totals[pair.label] += 1
        totals[pair.extra["class"]] += 1
        by_label[pair.label] += no
        by_class[pair.extra["class"]] += no
    return {
        "lossy": [by_label["lossy"], totals["lossy"]],
        "faithful": [by_label["faithful"], totals["faithful"]],
        "classes": {k: [by_class[k], totals[k]] for k in sorted(by_class.keys() | totals.keys())
                    if k not in {"lossy", "faithful"}},
    }  # fmt: skip


def timing_pair() -> tuple[str, str]:
    """A parent of about 2,000 tokens (the conversations' turns in order) and a summary of about
    300 (the turns that carry a digit, cut at 300 tokens)."""
    turns = [turn for conversation in conversations().values() for turn in conversation]
    parent: list[str] = []
    while len(_TOKEN.findall(" ".join(parent))) < PARENT_TOKENS:
        parent.append(turns[len(parent) % len(turns)])
    summary: list[str] = []
    for turn in (t for t in parent if any(c.isdigit() for c in t)):
        if len(_TOKEN.findall(" ".join([*summary, turn]))) > SUMMARY_TOKENS:
            break
        summary.append(turn)
    return " ".join(parent), " ".join(summary)


def time_facts(repeat: int = 15, number: int = 200) -> dict[str, Any]:
    """CPU seconds per facts-only check of the timing pair, ``repeat`` samples of ``number``
    checks each: ``seconds_per_pair`` with the parent's facts extracted every time (its first
    check), ``cached_seconds_per_pair`` with them taken from the cache (the same parent checked
    again, as a pass does for every summary folding it). Process CPU time, not wall clock, so
    other jobs on the machine slow it less; the spread of the samples says how much they did."""
    parent, summary = timing_pair()
    settings = FidelitySettings(method="facts")

    def check(*, cold: bool) -> None:
        if cold:
            clear_parent_facts()
        check_fidelity([("parent", parent)], ("summary", summary), settings)

    def samples(*, cold: bool) -> list[float]:
        out = []
        for _ in range(repeat):
            start = time.process_time()
            for _ in range(number):
                check(cold=cold)
            out.append((time.process_time() - start) / number)
        return out

    first, again = samples(cold=True), samples(cold=False)
    return {
        "parent_tokens": len(_TOKEN.findall(parent)),
        "summary_tokens": len(_TOKEN.findall(summary)),
        "clock": "process CPU time",
        "seconds_per_pair": statistics.median(first),
        "samples_s": first,
        "cached_seconds_per_pair": statistics.median(again),
        "cached_samples_s": again,
        "load_average": list(os.getloadavg()),
    }


def measure(rate: float = RATE, *, timing: bool = True) -> dict[str, Any]:
    pairs, digest = read_pairs(str(PAIRS))
    held_out = held_out_sources()
    facts = refused_by_facts(pairs)
    similarity = similarities(pairs, MiniLMEmbedder())
    fit = [s for p, s in zip(pairs, similarity, strict=True)
           if p.extra["source"] not in held_out and p.label == "faithful"]  # fmt: skip
    floor = int(largest_quiet_floor(fit, rate) * 100) / 100
    test = [i for i, p in enumerate(pairs) if p.extra["source"] in held_out]
    test_pairs = [pairs[i] for i in test]

    def both(at: float) -> list[bool]:
        return [facts[i] or similarity[i] < at for i in test]

    report: dict[str, Any] = {
        "pairs": {"file": PAIRS.name, "sha256": digest, "count": len(pairs)},
        "held_out_sources": sorted(held_out),
        "rate": rate,
        "floor": floor,
        "fitted_on_faithful_pairs": len(fit),
        "methods": {
            "facts (all pairs)": rates(pairs, facts),
            "facts": rates(test_pairs, [facts[i] for i in test]),
            "facts+embedding": rates(test_pairs, both(floor)),
        },
        "curve": {str(at): rates(test_pairs, both(at)) for at in CURVE},
    }
    if timing:
        report["timing"] = time_facts()
    return report


def _share(counts: Sequence[int]) -> str:
    return f"{counts[0]}/{counts[1]} {counts[0] / counts[1]:.1%}" if counts[1] else "-"


def render(report: dict[str, Any], out: IO[str]) -> None:
    out.write(
        f"fidelity: {report['pairs']['count']} pairs; floor {report['floor']} fitted on "
        f"{report['fitted_on_faithful_pairs']} faithful pairs (at most {report['rate']:.0%} "
        f"refused), reported on the held-out conversations\n\n"
    )
    rows = [["method", "lossy refused", "faithful refused", "target", "status"]]
    for name, result in report["methods"].items():
        goal = TARGETS.get(name.split(" (")[0])  # "facts (all pairs)" has the facts target
        lossy, faithful = result["lossy"], result["faithful"]
        status, target = "-", "-"
        if goal is not None:
            met = lossy[0] >= goal[0] * lossy[1] and faithful[0] <= goal[1] * faithful[1]
            status = "met" if met else "MISSED"
            target = f">= {goal[0]:.0%} / <= {goal[1]:.0%}"
        rows.append([name, _share(lossy), _share(faithful), target, status])
    _table(rows, out)
    out.write("\nrefused, by class (held out)\n")
    facts, both = report["methods"]["facts"], report["methods"]["facts+embedding"]
    rows = [["class", "facts", "facts+embedding"]]
    rows += [[k, _share(v), _share(both["classes"][k])] for k, v in facts["classes"].items()]
    _table(rows, out)
    out.write("\nfacts+embedding by floor (held out)\n")
    rows = [["floor", "lossy refused", "faithful refused"]]
    rows += [[f, _share(r["lossy"]), _share(r["faithful"])] for f, r in report["curve"].items()]
    _table(rows, out)
    if "timing" in report:
        timing = report["timing"]
        load = ", ".join(f"{figure:.2f}" for figure in timing["load_average"])
        out.write(
            f"\nfacts only, {timing['parent_tokens']}-token parent and "
            f"{timing['summary_tokens']}-token summary, CPU time per pair (median, min-max of "
            f"{len(timing['samples_s'])} samples; target well under {FACTS_TARGET_MS:g} ms):\n"
            f"  first check of the parent  {_spread(timing['samples_s'])}\n"
            f"  parent checked again       {_spread(timing['cached_samples_s'])}\n"
            f"  load average {load}\n"
        )


def _spread(samples: Sequence[float]) -> str:
    return (
        f"{statistics.median(samples) * 1e6:.0f} us "
        f"({min(samples) * 1e6:.0f}-{max(samples) * 1e6:.0f})"
    )


def _table(rows: list[list[str]], out: IO[str]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def main(argv: list[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__)
    parser.add_argument(
        "--rate", type=float, default=RATE, help="faithful share the fit may refuse"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"JSON output (default {RESULTS})"
    )
    parser.add_argument("--no-timing", action="store_true", help="skip the timing")
    args = parser.parse_args(argv)
    report = measure(args.rate, timing=not args.no_timing)
    render(report, out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.write(f"\nwrote {args.out}\n")
    return 0
