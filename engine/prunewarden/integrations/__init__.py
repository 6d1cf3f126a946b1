"""Adapters for agent frameworks: their message histories pruned by a session's pass.

A framework keeps the history; the adapter maps it to window segments (kinds, pins, eviction
groups for tool-call pairs, text hashes), scores them with a
:class:`~prunewarden.scoring.Scorer`, runs the session's pass for a token budget and gives the
framework back what to remove and the tombstone to write. Each framework's module needs its
extra: :mod:`prunewarden.integrations.langgraph` (``prunewarden[langgraph]``),
:mod:`prunewarden.integrations.openai_agents` (``prunewarden[openai-agents]``). Edits made by the
framework's own functions (``trim_messages``) are judged by
:mod:`prunewarden.integrations.edits` (``prunewarden[langgraph]``), an Agents SDK session's by
:mod:`prunewarden.integrations.openai_agents_edits`, and Anthropic's server-side context editing
by :mod:`prunewarden.integrations.anthropic` (``prunewarden[anthropic]``). This package itself
imports none of them.
"""

from __future__ import annotations

from prunewarden.integrations._pass import PassOutcome, Summarizer, WindowPruner, tombstone_text

__all__ = ["PassOutcome", "Summarizer", "WindowPruner", "tombstone_text"]
