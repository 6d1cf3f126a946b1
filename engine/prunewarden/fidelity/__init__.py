"""Rewrite fidelity: a summary that replaces its parents must still say what they said.

The public API (stable; ``docs/fidelity.md`` documents it):

- ``extract_facts(text) -> Facts``: the normalized facts of a text, by kind (:data:`FACT_KINDS`:
  ``number`` with its unit, ``identifier``, ``date`` (dates and times), ``path``, ``flag``,
  ``url``, ``code`` (backticked), ``quoted``, ``negation`` (the words a negator governs)).
- ``check_fidelity(parents, child, settings, *, embedder=None) -> FidelityResult``: ``parents``
  a sequence of ``(id, text)``, ``child`` one ``(id, text)``, ``settings`` a
  :class:`FidelitySettings` (``spec.fidelity`` resolved). The result lists per parent the
  facts counted and kept and the kinds lost (:class:`ParentFidelity`), ``kept_share``,
  ``lost``, and ``reasons``: ``summary_is_error``, ``negation_lost``, ``fact_lost`` and, with
  ``method`` ``embedding`` or ``both``, ``meaning_drift`` (needs ``embedder``; without one it
  raises ``LookupError``). Each reason's ``detail`` has ``parent``, ``child`` and ``lost``
  (kinds), never text.
- ``Judge``: the judge method's hook (``method: judge``), ``judge(parent_text, child_text) ->
  bool``: the harness's own entailment check, asked once per parent; a parent it does not see
  entailed is ``meaning_drift`` with ``detail.method: judge``.
- ``Embedder``: the meaning method's hook, ``embed(texts: Sequence[str]) ->
  list[list[float]]``, called once per check with every sentence
  (:class:`prunewarden.scoring.embed.MiniLMEmbedder` is the bundled one, extra ``embed``).
- ``sentences(text)``, ``sentence_similarities(parents, child_text, embedder)``: how the meaning
  method splits texts, and per parent each sentence's best cosine to a child sentence (what
  ``prunewarden calibrate --fidelity`` fits ``embedding_floor`` to).
- ``OPAQUE_KIND``: the kind of a summary whose text cannot be read (``spec.fidelity.opaque``).
- ``is_error_text(text, patterns)``, ``DEFAULT_ERROR_PATTERNS``: what ``summary_is_error``
  matches (empty or whitespace, provider errors, stack traces, refusals).

The package imports nothing of prunewarden but :mod:`prunewarden.decision` (for ``Reason``): the
guards, the planner and the adapters call it, and it is cheap to import.
"""

from __future__ import annotations

from prunewarden.fidelity._check import (
    DEFAULT_ERROR_PATTERNS,
    OPAQUE_KIND,
    FidelityResult,
    FidelitySettings,
    Judge,
    ParentFidelity,
    check_fidelity,
    fact_ledger,
    is_error_text,
)
from prunewarden.fidelity._facts import FACT_KINDS, Facts, extract_facts
from prunewarden.fidelity._meaning import Embedder, sentence_similarities, sentences

__all__ = [
    "DEFAULT_ERROR_PATTERNS",
    "FACT_KINDS",
    "OPAQUE_KIND",
    "Embedder",
    "Facts",
    "FidelityResult",
    "FidelitySettings",
    "Judge",
    "ParentFidelity",
    "check_fidelity",
    "extract_facts",
    "fact_ledger",
    "is_error_text",
    "sentence_similarities",
    "sentences",
]
