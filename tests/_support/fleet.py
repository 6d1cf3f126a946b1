"""Many small traces for the fleet tests: generated healthy sessions of a few turns each."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _make_traces() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_traces_fleet", ROOT / "examples" / "make_traces.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_traces = _make_traces()


def generated_traces(folder: Path, count: int) -> list[str]:
    """``count`` traces in ``folder``, each a different seed, turns and window size."""
    paths = []
    for seed in range(count):
        path = folder / f"session-{seed:04}.jsonl"
        make_traces.write(path, make_traces.synthetic(3 + seed % 4, 6 + seed % 5, seed))
        paths.append(str(path))
    return paths
