"""The values ``prunewarden calibrate``'s options take, checked as argparse reads them."""

from __future__ import annotations

import argparse
import datetime as dt
import math


def rate(text: str) -> float:
    value = number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in [0, 1]")
    return value


def fraction(text: str) -> float:
    value = number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1]")
    return value


def cycles(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of cycles") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of cycles in [1, 100000]")
    return value


def margin(text: str) -> float:
    value = number(text)
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a margin in [0, 100]")
    return value


def number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def date(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None
