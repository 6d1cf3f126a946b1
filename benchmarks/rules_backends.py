"""The two CEL backends side by side: rule time of a pass, and compiling the example rules.

- **Rule time**: the 3-rule eviction pass of ``benchmarks/rules_cache.py`` (200 segments, one
  audit record), cache off, on an engine per backend; a backend's rule time is its pass minus
  the same pass on an engine without rules. The engines take turns within each pass.
- **Cold compile**: every ``when`` and ``message_expression`` of the example policies, compiled
  by each backend's own compiler (cel-python's parser; cel-cpp's, on the source the project's
  checker accepted), and each example policy made into an engine, per backend.

    python benchmarks/rules_backends.py

Needs the ``cel-native`` extra. ``run()`` returns the numbers as a dict.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import yaml
from prunewarden import Engine, load_policy, parse_policy
from prunewarden.rules._compiler import _parse
from prunewarden.rules._native import _environment

from benchmarks.rules_cache import POLICY, SEGMENTS, _NullLogger, _segment

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "policies").glob("*.yaml"))
TARGET_RULE_RATIO = 0.15  # native rule time / cel-python rule time (issue 31)
TARGET_COMPILE_RATIO = 0.3
WARMUP_PASSES = 2
MEASURED_PASSES = 10
COMPILE_REPEAT = 20


def _passes(seed: int) -> dict[str, float]:
    plain = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: plain, version: 1.0.0}\n"
    policy = parse_policy(POLICY)
    engines = {
        "no_rules": Engine(parse_policy(plain), logger=_NullLogger()),
        "python": Engine(policy, logger=_NullLogger(), rule_cache_size=0, cel="python"),
        "native": Engine(policy, logger=_NullLogger(), rule_cache_size=0, cel="native"),
    }
    rng = random.Random(seed)
    documents = [_segment(rng, i) for i in range(SEGMENTS)]
    items = [{key: d[key] for key in ("segment", "score", "perturbed_score")} for d in documents]
    ids = [d["segment"]["id"] for d in documents]
    times: dict[str, list[float]] = {name: [] for name in engines}
    for n in range(WARMUP_PASSES + MEASURED_PASSES):
        order = list(engines)
        rng.shuffle(order)
        for name in order:
            started = time.perf_counter()
            engines[name].authorize_evictions(items, ids)
            if n >= WARMUP_PASSES:
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def _sources() -> list[str]:
    sources = []
    for path in EXAMPLES:
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            spec = document.get("spec") if isinstance(document, dict) else None
            for rule in (spec or {}).get("rules") or []:
                sources += [rule[k].strip() for k in ("when", "message_expression") if k in rule]
    return sources


def _compile_seconds(sources: list[str]) -> dict[str, float]:
    environment = _environment()  # built once per process, like the engine does
    samples: dict[str, list[float]] = {"python": [], "native": []}
    for _ in range(COMPILE_REPEAT):
        started = time.perf_counter()
        for source in sources:
            _parse(source)
        samples["python"].append(time.perf_counter() - started)
        started = time.perf_counter()
        for source in sources:
            environment.compile(source, disable_check=True)
        samples["native"].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def _engine_seconds() -> dict[str, float]:
    policies = [load_policy(path) for path in EXAMPLES]
    samples: dict[str, list[float]] = {"python": [], "native": []}
    for _ in range(COMPILE_REPEAT):
        for backend, values in samples.items():
            started = time.perf_counter()
            for policy in policies:
                Engine(policy, logger=_NullLogger(), cel=backend)
            values.append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def run(seed: int = 7) -> dict[str, Any]:
    passes = _passes(seed)
    python_rules = passes["python"] - passes["no_rules"]
    native_rules = passes["native"] - passes["no_rules"]
    sources = _sources()
    compiled = _compile_seconds(sources)
    engines = _engine_seconds()
    return {
        "segments": SEGMENTS,
        "rules": 3,
        "pass_seconds_no_rules": passes["no_rules"],
        "pass_seconds_python": passes["python"],
        "pass_seconds_native": passes["native"],
        "rule_seconds_python": python_rules,
        "rule_seconds_native": native_rules,
        "rule_ratio_native_vs_python": native_rules / python_rules,
        "pass_ratio_native_vs_python": passes["native"] / passes["python"],
        "expressions_compiled": len(sources),
        "compile_seconds_python": compiled["python"],
        "compile_seconds_native": compiled["native"],
        "compile_ratio_native_vs_python": compiled["native"] / compiled["python"],
        "engine_seconds_python": engines["python"],
        "engine_seconds_native": engines["native"],
    }


def main() -> None:
    r = run()
    rule_ratio, compile_ratio = (
        r["rule_ratio_native_vs_python"],
        r["compile_ratio_native_vs_python"],
    )
    met = "met" if rule_ratio <= TARGET_RULE_RATIO else "MISSED"
    print(f"eviction pass: {SEGMENTS} segments, 3 rules, cache off")
    print(f"  no rules (reference):  {r['pass_seconds_no_rules'] * 1000:8.2f} ms")
    print(f"  cel-python pass:       {r['pass_seconds_python'] * 1000:8.2f} ms")
    print(f"  native pass:           {r['pass_seconds_native'] * 1000:8.2f} ms")
    print(f"  rule time, cel-python: {r['rule_seconds_python'] * 1000:8.2f} ms")
    print(f"  rule time, native:     {r['rule_seconds_native'] * 1000:8.2f} ms")
    print(f"  rule ratio:            {rule_ratio:8.3f}x (target <= {TARGET_RULE_RATIO:g}: {met})")
    print(f"  whole-pass ratio:      {r['pass_ratio_native_vs_python']:8.3f}x")
    met = "met" if compile_ratio <= TARGET_COMPILE_RATIO else "MISSED"
    print(f"cold compile of the example rules ({r['expressions_compiled']} expressions)")
    print(f"  cel-python parser:     {r['compile_seconds_python'] * 1000:8.2f} ms")
    print(f"  cel-cpp compiler:      {r['compile_seconds_native'] * 1000:8.2f} ms")
    goal = f"target <= {TARGET_COMPILE_RATIO:g}: {met}"
    print(f"  ratio:                 {compile_ratio:8.3f}x ({goal})")
    print(f"  engines, cel-python:   {r['engine_seconds_python'] * 1000:8.2f} ms")
    print(f"  engines, native:       {r['engine_seconds_native'] * 1000:8.2f} ms")
    print(json.dumps(r, sort_keys=True))


if __name__ == "__main__":
    main()
