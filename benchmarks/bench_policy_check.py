"""How long ``prunewarden policy check`` takes on every shipped policy.

    python benchmarks/bench_policy_check.py [--runs 3] [--against builtin:default]

Checks each policy of ``policies/`` and ``examples/`` (the invalid ``replay.yaml`` aside) against
the base (the bundled default unless ``--against``), in this process, and prints the fastest of
``--runs`` runs per policy and the number of findings; the target is under 10 s each on a quiet
machine (docs/policy-check.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prunewarden.analysis import check_policies

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 10.0


def shipped_policies() -> list[Path]:
    found = [
        ROOT / "policies" / "default.yaml",
        *(ROOT / "examples" / "policies").glob("*.yaml"),
        *(ROOT / "examples" / "deployments").glob("*.yaml"),
        *(ROOT / "examples" / "agents").glob("minilm-*.yaml"),
    ]
    return sorted(path for path in found if path.name != "replay.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", default="builtin:default")
    args = parser.parse_args()
    slowest = 0.0
    for path in shipped_policies():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            findings = check_policies([str(path)], args.against)
            times.append(time.perf_counter() - start)
        best = min(times)
        slowest = max(slowest, best)
        print(f"{best:7.3f} s  {len(findings):2d} finding(s)  {path.relative_to(ROOT)}")
    verdict = "within" if slowest < TARGET_SECONDS else "OVER"
    print(f"slowest {slowest:.3f} s: {verdict} the {TARGET_SECONDS:g} s target")


if __name__ == "__main__":
    main()
