"""What deployments cost: decisions through a reloading or shadowed engine, and loading a chain.

Decisions: the example input documents, decided by an Engine on examples/deployments/prod-eu.yaml
(the plain reference), by a ReloadingEngine on the same file (one more attribute read per call),
and by an Engine with prod-eu-candidate.yaml in shadow (every request decided twice). Loading:
prod-eu.yaml resolved through its chain against the same merged content written as one file
(what reading two files, merging and keeping provenance add). Polling: one look at the files when
nothing changed, which a ReloadingEngine takes every interval.

    python benchmarks/deployments.py

``run()`` returns the numbers as a dict, for a harness that collects benchmarks.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from prunewarden import Engine, ReloadingEngine, load_policy, parse_policy

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENTS = ROOT / "examples" / "deployments"
INPUTS = sorted((ROOT / "examples" / "inputs").glob("*.json"))
PASSES = 30
LOADS = 30
POLLS = 2000


class _NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


def _median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run() -> dict[str, Any]:
    """Median seconds per pass over the example inputs, per load, and per poll."""
    documents = [json.loads(path.read_text()) for path in INPUTS]
    active = load_policy(DEPLOYMENTS / "prod-eu.yaml")
    candidate = load_policy(DEPLOYMENTS / "prod-eu-candidate.yaml")
    reloading = ReloadingEngine(DEPLOYMENTS / "prod-eu.yaml", interval=0, logger=_NullLogger())
    engines: dict[str, Any] = {
        "plain": Engine(active, logger=_NullLogger()),
        "reloading": reloading,
        "shadow": Engine(active, shadow=candidate, logger=_NullLogger()),
    }
    times: dict[str, list[float]] = {name: [] for name in engines}
    for n in range(PASSES + 2):
        for name, engine in engines.items():  # in turn, so drift hits them alike
            started = time.perf_counter()
            for document in documents:
                engine.evaluate(document)
            if n >= 2:  # the first passes warm caches
                times[name].append(time.perf_counter() - started)
    decide = {name: statistics.median(values) for name, values in times.items()}

    flat_document = dict(active.document)
    with tempfile.TemporaryDirectory() as folder:
        flat = Path(folder) / "flat.yaml"
        flat.write_text(yaml.safe_dump(flat_document, sort_keys=False))
        assert parse_policy(flat.read_text()).digest == active.digest  # noqa: S101 - same content
        load_chain = _median_seconds(lambda: load_policy(DEPLOYMENTS / "prod-eu.yaml"), LOADS)
        load_flat = _median_seconds(lambda: load_policy(flat), LOADS)
    poll = _median_seconds(reloading.poll, POLLS)
    reloading.close()
    return {
        "inputs": len(documents),
        "pass_seconds_plain": decide["plain"],
        "pass_seconds_reloading": decide["reloading"],
        "pass_seconds_shadow": decide["shadow"],
        "ratio_reloading_vs_plain": decide["reloading"] / decide["plain"],
        "ratio_shadow_vs_plain": decide["shadow"] / decide["plain"],
        "load_seconds_chain": load_chain,
        "load_seconds_flat": load_flat,
        "ratio_chain_vs_flat": load_chain / load_flat,
        "poll_seconds_unchanged": poll,
        "poll_vs_one_decision": poll / (decide["plain"] / len(documents)),
    }


def main() -> None:
    result = run()
    per = result["inputs"]
    print(
        f"decisions: {per} example inputs per pass, prod-eu (base + overlay, 1 rule, 3 validators)"
    )
    print(f"  Engine (reference):     {result['pass_seconds_plain'] * 1000:8.2f} ms")
    print(
        f"  ReloadingEngine:        {result['pass_seconds_reloading'] * 1000:8.2f} ms"
        f"  ({result['ratio_reloading_vs_plain']:.2f}x)"
    )
    print(
        f"  Engine with a shadow:   {result['pass_seconds_shadow'] * 1000:8.2f} ms"
        f"  ({result['ratio_shadow_vs_plain']:.2f}x)"
    )
    print("loading prod-eu")
    print(f"  one flat file (ref.):   {result['load_seconds_flat'] * 1000:8.2f} ms")
    print(
        f"  extends chain:          {result['load_seconds_chain'] * 1000:8.2f} ms"
        f"  ({result['ratio_chain_vs_flat']:.2f}x)"
    )
    print(
        f"polling, nothing changed: {result['poll_seconds_unchanged'] * 1e6:8.1f} us"
        f"  ({result['poll_vs_one_decision']:.2f}x one decision)"
    )
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
