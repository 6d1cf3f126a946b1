"""Benchmarks: the engine against a plain reference implementation of the same check.

Run ``make bench`` (or ``python -m benchmarks --help``). Each workload decides the same data twice
in one run, once through the engine as an application runs it (validation, guard, decision and a
JSON log record) and once through straightforward Python written the way the source documents'
snippets are, asserts that both reach the same verdicts, and reports the ratio of their median
times.
"""
