"""How fast prunewarden starts: the CPU time of ``import prunewarden`` and of
``prunewarden --version``, each against ``python -c pass`` measured in the same run.

    python benchmarks/start_time.py [--repeat 15]

Each command runs in a fresh interpreter, the three interleaved ``--repeat`` times; the CPU time
is the child's user + system time (``getrusage``), which a busy machine inflates less than wall
time does. The ratio to ``python -c pass`` says how much the package adds to the interpreter's
own start, whatever the machine.

Measured with bytecode, as an installed package runs: the package is compiled first and the
children run without ``PYTHONDONTWRITEBYTECODE`` (a machine that sets it would otherwise measure
compiling every module on each start), after one unmeasured warm-up run of each command.

``run()`` returns the medians as a dict, for ``benchmarks/targets.py``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import prunewarden

# The targets, in CPU seconds on a quiet machine (where ``python -c pass`` takes ~0.04 s).
IMPORT_TARGET_SECONDS = 0.15
VERSION_TARGET_SECONDS = 0.2


def commands() -> dict[str, list[str]]:
    """What is measured: the interpreter alone, the import, and the command's ``--version``
    (its installed script when there is one next to this interpreter, else ``-m``)."""
    script = Path(sys.executable).with_name("prunewarden")
    version = [str(script)] if script.exists() else [sys.executable, "-m", "prunewarden"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import prunewarden": [sys.executable, "-c", "import prunewarden"],
        "prunewarden --version": [*version, "--version"],
    }


def _environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def cpu_seconds(argv: list[str], environment: dict[str, str]) -> float:
    """The user + system CPU time of one run of ``argv`` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=environment, check=True, stdout=subprocess.DEVNULL)  # noqa: S603
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(repeat: int = 15) -> dict[str, float]:
    """The median CPU seconds of each command, and each one's ratio to ``python -c pass``."""
    compileall.compile_dir(Path(prunewarden.__file__).parent, quiet=1)
    environment = _environment()
    measured = commands()
    for argv in measured.values():  # warm-up: writes any bytecode still missing
        cpu_seconds(argv, environment)
    samples: dict[str, list[float]] = {name: [] for name in measured}
    for _ in range(repeat):
        for name, argv in measured.items():
            samples[name].append(cpu_seconds(argv, environment))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    baseline = medians["python -c pass"]
    ratios = {f"{name} / pass": seconds / baseline for name, seconds in medians.items()}
    return {**medians, **ratios}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run(args.repeat)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    goals = {
        "import prunewarden": IMPORT_TARGET_SECONDS,
        "prunewarden --version": VERSION_TARGET_SECONDS,
    }
    print(f"start-up, CPU seconds (median of {args.repeat} interleaved runs, with bytecode)")
    for name in commands():
        seconds, ratio = results[name], results[f"{name} / pass"]
        goal = goals.get(name)
        status = ""
        if goal is not None:
            status = f"  <= {goal:g} s: {'met' if seconds <= goal else 'MISSED'}"
        print(f"  {name:24s} {seconds:6.3f} s  {ratio:5.2f}x python -c pass{status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
