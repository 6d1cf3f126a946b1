"""Write ``benchmarks/fidelity/pairs.jsonl``: labelled (parents, summary) pairs for the fidelity
benchmark, from the conversations of :mod:`benchmarks.fidelity.sources`, with a fixed seed.

    python -m benchmarks.fidelity.generate [--seed 27] [--out PATH]

Every window of three consecutive turns of a conversation is one summary's parents (three
segments). Each window gets two faithful summaries, every fact and instruction kept:

- ``faithful_extractive``: the turns' own sentences, verbatim or telegraphic (articles and
  filler words left out), under a header now and then;
- ``faithful_paraphrase``: each turn reworded and reshaped (:mod:`benchmarks.fidelity.paraphrase`),
  neighbours now and then joined into one sentence;

and two lossy ones, of two classes among those the window allows, the rarest so far first:

- ``lossy_fact_dropped``: one turn carrying a fact left out of the summary, or one fact cut out
  of its sentence; in a window whose turns carry no fact (as issue 27 counts facts: numbers, code
  tokens, acronyms, paths, quoted text) one turn left out, labelled ``lossy_sentence_dropped``:
  what the facts method cannot see by design and the meaning method is for;
- ``lossy_number_changed``: one number of the summary changed;
- ``lossy_negation_lost``: one negation taken out, the rest as it was ("never emit local time"
  becomes "emit local time");
- ``lossy_error``: a provider error, a stack trace, a refusal or an empty text as the summary.

A lossy summary is the faithful one (paraphrased or extractive) with that one loss, so that the
benchmark measures the loss and nothing else.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.fidelity.paraphrase import paraphrase, protected_spans
from benchmarks.fidelity.sources import conversations

PAIRS = Path(__file__).resolve().parent / "pairs.jsonl"
SEED = 27
WINDOW = 3

LOSSY = ("lossy_fact_dropped", "lossy_number_changed", "lossy_negation_lost", "lossy_error")

ERRORS = (
    (
        "Error code: 429 - {'error': {'message': 'Rate limit reached for requests', "
        "'type': 'requests', 'code': 'rate_limit_exceeded'}}"
    ),
    "openai.APIConnectionError: Connection error.",
    (
        "anthropic.InternalServerError: Error code: 529 - {'type': 'error', 'error': "
        "{'type': 'overloaded_error', 'message': 'Overloaded'}}"
    ),
    (
        'Traceback (most recent call last):\n  File "summarize.py", line 42, in <module>\n'
        "    summary = model.invoke(messages)\nTimeoutError: timed out"
    ),
    "I'm sorry, but I can't help with that.",
    "I cannot assist with summarizing this conversation.",
    "Unfortunately, I am unable to summarize this content.",
    "",
    "   \n  ",
    "Request failed with status code 500",
    (
        '{"error": {"code": 400, "message": "Request payload size exceeds the limit", '
        '"status": "INVALID_ARGUMENT"}}'
    ),
    "context_length_exceeded: This model's maximum context length is 8192 tokens.",
    "Sorry, I can't summarize that.",
    "Internal Server Error",
)

_FILLER = re.compile(r"\b(?:the|a|an|also|just|about|really)\s", re.IGNORECASE)
_HEADERS = ("", "", "Summary: ", "Earlier: ", "So far: ")
_NEGATION = re.compile(
    r"\b(?:Do not ever|Don't ever|Do not|Don't|Never|never|not ever|at no point|At no point|"
    r"do not|don't|must not|must never|cannot)\s|, not\s|\bnot\s|\bwithout\s"
)
_POSITIVE = {"must not": "must ", "must never": "must ", "cannot": "can ", ", not": ", and "}
_DIGITS = re.compile(r"\d+")


def _telegraphic(sentence: str) -> str:
    """The sentence without articles and filler words, its facts untouched."""
    out, at = [], 0
    for start, end in [*protected_spans(sentence), (len(sentence), len(sentence))]:
        out.append(_FILLER.sub("", sentence[at:start]))
        out.append(sentence[start:end])
        at = end
    text = "".join(out)
    return text[0].upper() + text[1:] if text[:1].isalpha() else text


def extractive(turns: list[str], rng: random.Random) -> str:
    # Half verbatim, half telegraphic.
    sentences = turns if rng.random() < 0.5 else [_telegraphic(t) for t in turns]
    return rng.choice(_HEADERS) + " ".join(sentences)


def drop_fact(sentences: list[str], rng: random.Random) -> str | None:
    """One sentence carrying a fact left out, or one fact cut out of its sentence (None when no
    sentence carries a fact)."""
    carrying = [i for i, s in enumerate(sentences) if protected_spans(s, facts_only=True)]
    if not carrying:
        return None
    if rng.random() < 0.5:
        dropped = rng.choice(carrying)
        return " ".join(s for i, s in enumerate(sentences) if i != dropped)
    at = rng.choice(carrying)
    start, end = rng.choice(protected_spans(sentences[at], facts_only=True))
    cut = sentences[at][:start].rstrip() + sentences[at][end:]
    cut = re.sub(r"\b(?:at|for|of|by|to|from|in|on|within|under|with|is)\s*([,.;])", r"\1", cut)
    return " ".join([*sentences[:at], cut, *sentences[at + 1 :]])


def change_number(summary: str, rng: random.Random) -> str | None:
    found = list(_DIGITS.finditer(summary))
    if not found:
        return None
    number = rng.choice(found)
    value = int(number.group(0)) + rng.choice((1, 2, 5, 10))
    text = str(value).zfill(len(number.group(0)))
    return summary[: number.start()] + text + summary[number.end() :]


def lose_negation(summary: str, rng: random.Random) -> str | None:
    found = list(_NEGATION.finditer(summary))
    if not found:
        return None
    negation = rng.choice(found)
    words = negation.group(0).strip()
    positive = _POSITIVE.get(words, "with " if words == "without" else "")
    rest = summary[negation.end() :]
    before = summary[: negation.start()]
    if (not before.strip() or before.rstrip().endswith((".", ":"))) and not positive:
        rest = rest[:1].upper() + rest[1:]
    return before + positive + rest


def lossy(kind: str, base: list[str], rng: random.Random) -> str | None:
    """The summary ``base`` (its sentences) with one loss of ``kind``; None if it has none to
    lose."""
    summary = " ".join(base)
    if kind == "lossy_fact_dropped":
        return drop_fact(base, rng)
    if kind == "lossy_sentence_dropped":
        dropped = rng.randrange(len(base))
        return " ".join(s for i, s in enumerate(base) if i != dropped)
    if kind == "lossy_number_changed":
        return change_number(summary, rng)
    if kind == "lossy_negation_lost":
        return lose_negation(summary, rng)
    return rng.choice(ERRORS)


def pairs(seed: int = SEED) -> list[dict[str, Any]]:
    """Every pair, in a fixed order for a given seed."""
    rng = random.Random(seed)
    made: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for source, turns in conversations().items():
        for first in range(len(turns) - WINDOW + 1):
            window = turns[first : first + WINDOW]
            parents = [
                {"id": f"{source}-{first + n + 1:02d}", "text": text}
                for n, text in enumerate(window)
            ]

            def add(
                kind: str,
                summary: str,
                parents: list[dict[str, str]] = parents,
                source: str = source,
            ) -> None:
                label = "faithful" if kind.startswith("faithful") else "lossy"
                pair_id = f"{parents[0]['id']}/{kind.split('_', 1)[1]}"
                made.append(
                    {"id": pair_id, "source": source, "class": kind, "label": label,
                     "parents": parents, "summary": summary}
                )  # fmt: skip

            paraphrased = paraphrase(window, rng)
            add("faithful_extractive", extractive(window, rng))
            add("faithful_paraphrase", " ".join(paraphrased))
            bases = [
                paraphrase(window, rng, join=False),
                [_telegraphic(t) for t in window],
                window,
            ]
            # The error class is a sixth of the lossy pairs; the others share the rest.
            order = sorted(LOSSY, key=lambda k: (counts[k] * (2 if k == "lossy_error" else 1),
                                                 rng.random()))  # fmt: skip
            chosen = 0
            for wanted in order:
                base = rng.choice(bases)
                kind, summary = wanted, lossy(wanted, base, rng)
                if summary is None and wanted == "lossy_fact_dropped":
                    kind = "lossy_sentence_dropped"
                    summary = lossy(kind, base, rng)
                if summary is None:
                    continue
                add(kind, summary)
                counts[wanted] += 1
                chosen += 1
                if chosen == 2:  # two lossy summaries per window
                    break
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=PAIRS)
    args = parser.parse_args(argv)
    made = pairs(args.seed)
    with args.out.open("w", encoding="utf-8") as out:
        for pair in made:
            out.write(json.dumps(pair, ensure_ascii=False, sort_keys=True) + "\n")
    classes = Counter(p["class"] for p in made)
    print(f"wrote {len(made)} pairs to {args.out}: " + ", ".join(
        f"{n} {k}" for k, n in sorted(classes.items())))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
