"""The benchmark harness runs every workload, checks agreement and writes its report.

Nothing here is timed: one short sample per timing proves the harness works, not how fast the
engine is (``make bench`` measures that).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine

from benchmarks import rules_cost, start_time, transition_scale, ts_client, value_types
from benchmarks.bench_auditlog import appending
from benchmarks.fidelity import generate as fidelity_pairs
from benchmarks.fidelity import measure as fidelity_measure
from benchmarks.harness import (
    Case,
    DisagreementError,
    Workload,
    check_agreement,
    main,
    run_workload,
)
from benchmarks.targets import TARGETS
from benchmarks.workloads import load
from benchmarks.workloads.eviction import evictions


class TestHarness:
    def test_every_workload_runs_and_is_reported(self, tmp_path: Path) -> None:
        """One quick run: the table lists every workload, the JSON has medians, the ratio and
        the stages of each, and the machine it ran on."""
        out = io.StringIO()
        report = tmp_path / "bench.json"
        argv = ["--repeat", "1", "--min-time", "0", "--out", str(report)]
        assert main(argv, out, io.StringIO()) == 0
        data = json.loads(report.read_text(encoding="utf-8"))
        names = [r["name"] for r in data["results"]]
        assert names == list(load())
        for result in data["results"]:
            assert result["engine_s"] > 0
            assert result["reference_s"] > 0
            assert result["ratio"] == pytest.approx(result["engine_s"] / result["reference_s"])
            assert set(result["stages_s"]) >= {"validation", "decision", "record", "log"}
        assert {"nproc", "cpu", "python"} <= set(data["machine"])
        table = out.getvalue()
        assert all(name in table for name in names)
        assert "<= 0.5x" in table

    def test_workloads_with_targets(self) -> None:
        """The issue's targets are registered: collapse at 200 entries, an eviction pass to a
        chained audit file, staleness at 200 spans."""
        targets = {name: w.target for name, w in load().items() if w.target is not None}
        assert targets == {
            "collapse/200": 0.5,
            "eviction/pass-200": 4.0,
            "eviction/pass-200/first-failure": 5.0,
            "staleness/200": 2.0,
            "eviction/pass-200/observed": 1.10,
        }

    def test_disagreement_is_an_error(self) -> None:
        """A reference that reaches another verdict stops the run instead of timing it."""
        good = load()["eviction/pass-200"].build()
        wrong = Case(
            decisions=good.decisions,
            engine=good.engine,
            reference=lambda: [("allow", ("authorized",), None)] * good.decisions,
        )
        with pytest.raises(DisagreementError, match="eviction/pass-200: decision 1"):
            check_agreement("eviction/pass-200", wrong)

    def test_stages_are_timed_with_the_rest(self) -> None:
        """A workload's samples hold the engine, the reference and each stage, repeat times."""
        workload = Workload("tiny", load()["collapse/40"].build, target=1.0)
        result = run_workload(workload, repeat=2, min_time=0)
        assert {k: len(v) for k, v in result.samples.items()} == {
            "engine": 2,
            "reference": 2,
            "stage:validation": 2,
            "stage:guard": 2,
            "stage:decision": 2,
            "stage:record": 2,
            "stage:log": 2,
        }
        assert result.met == (result.ratio <= 1.0)


class TestTargets:
    def test_every_target_of_the_issue_is_measured(self) -> None:
        """benchmarks/targets.py measures the seven targets with their goals (nothing timed)."""
        goals = {name: (goal, lower) for name, _, goal, lower, _ in TARGETS}
        assert goals["eviction pass vs seeds' loop"] == (4.0, True)
        assert goals["eviction pass vs first-failure loop"] == (5.0, True)
        assert goals["collapse/200 vs seed code"] == (0.5, True)
        assert goals["staleness/200 vs seed code"] == (2.0, True)
        assert goals["warm 3-rule pass"] == (12.0, True)
        assert goals["replay 500 x 200, wall"] == (0.5, True)
        assert goals["audit appends, 4 writers"] == (50_000.0, False)
        assert goals["metrics and spans on vs off"] == (1.10, True)
        assert "collapse/200 vs fsum reference" in goals
        assert goals["native rules vs cel-python"] == (0.15, True)
        assert goals["native cold compile vs cel-python"] == (0.3, True)
        assert goals["rule cost underestimates"] == (0.0, True)
        assert goals["rule cost estimates within 10x"] == (90.0, False)
        assert goals["import prunewarden, CPU"] == (0.15, True)
        assert goals["prunewarden --version, CPU"] == (0.2, True)
        assert goals["fidelity by facts, 2k/300 tokens, CPU"] == (1.0, True)

    def test_appends_from_writer_processes_verify(self, tmp_path: Path) -> None:
        """The append benchmark's writers leave one chain that verifies (a tiny run)."""
        results = appending(tmp_path, 2, 40, 10)
        assert [name for name, _ in results][1] == "2 writers, chained, fsync batch, batches of 10"

    def test_start_time_measures_each_command_against_python(self) -> None:
        """The start-up benchmark gives each command's CPU time and its ratio to python -c pass
        (one interleaved run: it works, not how fast)."""
        results = start_time.run(repeat=1)
        for name in start_time.commands():
            assert results[name] > 0
            assert results[f"{name} / pass"] == pytest.approx(
                results[name] / results["python -c pass"]
            )


class TestRulesCost:
    def test_rank_correlation_of_known_orders(self) -> None:
        """spearman() is 1 for the same order, -1 for the reverse, and shares tied ranks."""
        assert rules_cost.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
        assert rules_cost.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
        assert rules_cost.spearman([1, 1, 2], [5, 5, 9]) == pytest.approx(1.0)

    def test_corpus_holds_every_shipped_rule_and_the_probes(self) -> None:
        """The benchmark's corpus: the probes first (``true``, the unit), then the rules of
        policies/, examples/ and tests/cases/, each compiled and estimated for its input."""
        cases = rules_cost._probe_cases() + rules_cost._rule_cases()
        assert cases[0][0] == "true"
        assert any("contains_any(segment.text, params.negations)" in c[0] for c in cases)
        (row,) = rules_cost._timed([rules_cost._prepared(cases[2])])
        assert row["source"] == "segment.text.contains('never')"
        assert row["estimate"] >= rules_cost.TEXT_CHARS // 1024
        assert row["text"] in rules_cost.TEXTS
        assert row["seconds"] > 0

    def test_a_long_text_is_timed_on_each_text_and_a_text_blind_one_once(self) -> None:
        """An expression reading segment.text gets one input per text of TEXTS (same sizes,
        so one estimate); one reading only score gets a single input."""
        by_source = {c[0]: c for c in rules_cost._probe_cases()}
        reads_text = rules_cost._prepared(
            by_source["contains_any(segment.text, ['never', 'do not', 'must not'])"]
        )
        assert list(reads_text["cel"]) == list(rules_cost.TEXTS)
        blind = rules_cost._prepared(by_source["score < 0.5"])
        assert list(blind["cel"]) == ["words"]
        folding = rules_cost.TEXTS["folding x3"]
        assert len(folding.casefold()) == 3 * len(folding) == 3 * rules_cost.TEXT_CHARS


class TestTransitionScale:
    def test_a_tiny_run_reports_the_ratio_and_the_scale(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """benchmarks/transition_scale.py runs on small windows and prints both verdicts (its
        transitions are decided as the benchmark says: one clean, the scaled ones refused)."""
        assert transition_scale.main(["--sizes", "40,80", "--repeat", "1"]) == 0
        out = capsys.readouterr().out
        assert "200 -> 150 transition" in out
        assert "per-segment cost, 80 against 40 segments" in out
        decision = Engine.default().evaluate(transition_scale.transition(40))
        assert decision.codes == ("group_split",)


class TestValueTypes:
    def test_every_kind_builds_the_same_pass_and_is_reported(self) -> None:
        """One tiny run: every kind of class builds the pass the dataclasses build (codes,
        messages, outcomes), and the table gives each kind its time and ratio."""
        items, ids = evictions()
        value_types.check_agreement(items, frozenset(ids))
        out = io.StringIO()
        assert value_types.main(["--rounds", "1", "--passes", "1"], out) == 0
        rows = {line.split()[0]: line.split()[2] for line in out.getvalue().splitlines()[1:]}
        assert set(rows) == set(value_types.KINDS)
        assert rows[value_types.REFERENCE] == "1.00x"


class TestTypeScriptClient:
    @pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
    def test_a_tiny_run_measures_every_client_in_every_repeat(self) -> None:
        """Two repeats of five calls against a real server: a p50 for each client and repeat."""
        p50s = ts_client.measure(requests=5, repeats=2, warmup=1)
        assert set(p50s) == set(ts_client.LABELS)
        assert all(len(values) == 2 and min(values) > 0 for values in p50s.values())


class TestFidelityPairs:
    def test_the_committed_pairs_are_what_the_generator_writes(self, tmp_path: Path) -> None:
        """benchmarks/fidelity/pairs.jsonl is regenerated byte for byte from its fixed seed."""
        out = tmp_path / "pairs.jsonl"
        assert fidelity_pairs.main(["--out", str(out)]) == 0
        assert out.read_bytes() == fidelity_pairs.PAIRS.read_bytes()

    def test_at_least_200_labelled_pairs_of_every_class(self) -> None:
        """Over 200 pairs; each class has pairs, each label follows its class, every window has
        two faithful summaries, and a paraphrase is never the parents' text."""
        made = fidelity_pairs.pairs()
        classes = {p["class"] for p in made}
        assert len(made) >= 200
        assert classes == {
            "faithful_extractive",
            "faithful_paraphrase",
            "lossy_error",
            "lossy_fact_dropped",
            "lossy_negation_lost",
            "lossy_number_changed",
            "lossy_sentence_dropped",
        }
        assert all(p["label"] == p["class"].split("_")[0] for p in made)
        paraphrases = [p for p in made if p["class"] == "faithful_paraphrase"]
        assert len(paraphrases) * 4 == len(made)
        assert all(
            p["summary"] != " ".join(parent["text"] for parent in p["parents"]) for p in paraphrases
        )

    def test_the_report_names_each_method_with_its_target(self) -> None:
        """The rendered report: both methods against their targets, the classes, the curve."""
        counts: dict[str, Any] = {
            "lossy": [19, 20],
            "faithful": [1, 20],
            "classes": {"lossy_error": [2, 2]},
        }
        report = {
            "pairs": {"count": 40},
            "floor": 0.6,
            "fitted_on_faithful_pairs": 20,
            "rate": 0.05,
            "methods": {"facts": counts, "facts+embedding": counts},
            "curve": {"0.6": counts},
        }
        out = io.StringIO()
        fidelity_measure.render(report, out)
        lines = out.getvalue().splitlines()
        assert "facts              19/20 95.0%         1/20 5.0%  >= 90% / <= 10%     met" in lines
        assert "facts+embedding    19/20 95.0%         1/20 5.0%   >= 95% / <= 5%     met" in lines
        assert "lossy_error  2/2 100.0%       2/2 100.0%" in lines
        assert "0.6      19/20 95.0%         1/20 5.0%" in lines

    def test_the_report_gives_cpu_time_with_its_spread(self) -> None:
        """The timing lines: CPU time per pair, median and min-max, first and cached checks,
        and the load average."""
        counts: dict[str, Any] = {"lossy": [1, 1], "faithful": [0, 1], "classes": {}}
        report = {
            "pairs": {"count": 2},
            "floor": 0.6,
            "fitted_on_faithful_pairs": 1,
            "rate": 0.05,
            "methods": {"facts": counts, "facts+embedding": counts},
            "curve": {},
            "timing": {
                "parent_tokens": 2006,
                "summary_tokens": 300,
                "samples_s": [0.0008, 0.0009, 0.00085],
                "cached_samples_s": [0.0002, 0.00019, 0.00021],
                "load_average": [8.5, 8.25, 8.0],
            },
        }
        out = io.StringIO()
        fidelity_measure.render(report, out)
        lines = out.getvalue().splitlines()
        assert "  first check of the parent  850 us (800-900)" in lines
        assert "  parent checked again       200 us (190-210)" in lines
        assert "  load average 8.50, 8.25, 8.00" in lines
