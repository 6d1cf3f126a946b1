"""The rule result cache at work: a steady-state eviction pass with and without it.

A pass (``Engine.authorize_evictions``, one audit record) asks the eviction guard about 200
segments under a policy with 3 rules; between passes 10% of the segments change (new text, new
score), as in an agent that rewrites a little of its window each cycle. The same passes run on
an engine whose cache is off, and on one without rules (the plain reference: what the built-in
guard and input validation cost alone).

    python benchmarks/rules_cache.py

``run()`` returns the numbers as a dict, for a harness that collects benchmarks.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

from prunewarden import Engine, parse_policy

SEGMENTS = 200
TARGET_SECONDS = 0.012  # the warm 3-rule pass
CHANGED = 0.10
WARMUP_PASSES = 2
MEASURED_PASSES = 10

POLICY = """
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: bench-rules, version: 1.0.0}
spec:
  params:
    negations: [never, do not, must not]
    low: 0.05
    long_segment: 400
  rules:
    - name: pin-negations
      check: eviction
      when: contains_any(segment.text, params.negations)
      effect: pin
      message: the segment states a negation
    - name: pin-definitions
      check: eviction
      when: segment.text.matches('(?i)\\\\b(refers to|is defined as|means)\\\\b')
      effect: pin
      message: the segment defines a term
    - name: long-and-low
      check: eviction
      when: >-
        score < params.low && segment.tokens != null && segment.tokens > params.long_segment
      effect: warn
      message: a long segment scored very low
"""
PLAIN = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: bench-plain, version: 1.0.0}\n"

WORDS = [
    "the",
    "agent",
    "reads",
    "writes",
    "file",
    "buffer",
    "plan",
    "step",
    "result",
    "context",
    "token",
    "window",
    "score",
]
TELLS = ["never emit local time", "buf refers to the old buffer", "do not retry", ""]


class _NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


def _segment(rng: random.Random, i: int) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
    if rng.random() < 0.2:  # a fifth of the segments carry a tell
        text += " " + rng.choice(TELLS)
    score = round(rng.uniform(0.0, 0.3), 3)
    return {
        "check": "eviction",
        "segment": {
            "id": f"seg-{i}",
            "kind": "turn",
            "text": text,
            "tombstone_written": True,
            "tokens": rng.randint(50, 800),
        },
        "score": score,
        "perturbed_score": score,
        "eviction_candidates": [f"seg-{i}"],
    }


def run(seed: int = 7) -> dict[str, Any]:
    """Median seconds per steady-state pass: no rules, rules with the cache off, and on.

    The three engines take turns on the same documents within each pass, so drift in the
    machine's speed affects them alike.
    """
    policy = parse_policy(POLICY)
    engines = {
        "no_rules": Engine(parse_policy(PLAIN), logger=_NullLogger()),
        "cache_off": Engine(policy, logger=_NullLogger(), rule_cache_size=0),
        "cache_on": Engine(policy, logger=_NullLogger()),
    }
    cache = engines["cache_on"]._pipelines["eviction"].rules.cache  # type: ignore[union-attr]  # noqa: SLF001
    rng = random.Random(seed)
    documents = [_segment(rng, i) for i in range(SEGMENTS)]
    times: dict[str, list[float]] = {name: [] for name in engines}
    hits = misses = 0
    for n in range(WARMUP_PASSES + MEASURED_PASSES):
        for i in rng.sample(range(SEGMENTS), int(SEGMENTS * CHANGED)):
            documents[i] = _segment(rng, i)
        if n == WARMUP_PASSES:
            hits, misses = cache.hits, cache.misses
        order = list(engines)
        rng.shuffle(order)
        items = [
            {key: d[key] for key in ("segment", "score", "perturbed_score")} for d in documents
        ]
        for name in order:
            engine = engines[name]
            started = time.perf_counter()
            engine.authorize_evictions(items, [d["segment"]["id"] for d in documents])
            if n >= WARMUP_PASSES:
                times[name].append(time.perf_counter() - started)
    hits, misses = cache.hits - hits, cache.misses - misses
    median = {name: statistics.median(values) for name, values in times.items()}
    rule_off = median["cache_off"] - median["no_rules"]
    rule_on = max(median["cache_on"] - median["no_rules"], 1e-9)
    return {
        "segments": SEGMENTS,
        "rules": 3,
        "changed_per_pass": CHANGED,
        "pass_seconds_no_rules": median["no_rules"],
        "pass_seconds_cache_off": median["cache_off"],
        "pass_seconds_cache_on": median["cache_on"],
        "speedup_cache_on_vs_off": median["cache_off"] / median["cache_on"],
        "rule_seconds_cache_off": rule_off,
        "rule_seconds_cache_on": rule_on,
        "rule_speedup_cache_on_vs_off": rule_off / rule_on,
        "cache_hit_rate": hits / (hits + misses) if hits + misses else 0.0,
    }


def main() -> None:
    result = run()
    print(f"steady-state eviction pass: {SEGMENTS} segments, 3 rules, {CHANGED:.0%} changed")
    print(f"  no rules (reference): {result['pass_seconds_no_rules'] * 1000:8.1f} ms")
    print(f"  rules, cache off:     {result['pass_seconds_cache_off'] * 1000:8.1f} ms")
    on = result["pass_seconds_cache_on"]
    met = "met" if on <= TARGET_SECONDS else "MISSED"
    target = f"target <= {TARGET_SECONDS * 1000:g} ms: {met}"
    print(f"  rules, cache on:      {on * 1000:8.1f} ms ({target})")
    print(f"  cache on vs off:      {result['speedup_cache_on_vs_off']:8.1f}x faster per pass")
    print(f"  rule time only:       {result['rule_speedup_cache_on_vs_off']:8.1f}x faster")
    print(f"  cache hit rate:       {result['cache_hit_rate']:8.1%} (steady state)")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
