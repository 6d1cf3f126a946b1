"""The scorer protocol, the recency baseline, binding scores into a window, and the MiniLM
scorer (the ``embed`` extra, installed by ``make test``) with its calibrated example policy."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.replay._run import SilentLogger, replay_trace
from prunewarden.scoring import (
    Perturbation,
    RecencyScorer,
    Scorer,
    Scores,
    bind_scores,
    text_sha256,
)
from prunewarden.scoring.embed import MiniLMEmbedder, MiniLMScorer

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
TRACES = sorted((AGENTS / "traces").glob("*.jsonl"))


@pytest.fixture(scope="module")
def minilm() -> MiniLMScorer:
    return MiniLMScorer()


class TestProtocol:
    def test_recency_scores_by_position_without_perturbing(self) -> None:
        """Oldest low, newest high, evenly between; the perturbation says none."""
        scores = RecencyScorer(0.0, 1.0).score([{"id": "a"}, {"id": "b"}, {"id": "c"}], "t")
        assert dict(scores) == {"a": (0.0, 0.0), "b": (0.5, 0.5), "c": (1.0, 1.0)}
        assert scores.perturbations["a"] == Perturbation("none")
        assert isinstance(RecencyScorer(), Scorer)

    def test_bind_scores_writes_score_hash_and_perturbation(self) -> None:
        """A scored segment carries its scores, the hash of its text and the perturbation;
        one left out keeps what it had."""
        scores = Scores({"a": (0.25, 0.5)}, {"a": Perturbation("leave_one_out", ("b",))})
        bound = bind_scores([{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], scores)
        assert bound[0] == {
            "id": "a",
            "text": "x",
            "score": 0.25,
            "perturbed_score": 0.5,
            "text_sha256": text_sha256("x"),
            "metadata": {"perturbation": {"kind": "leave_one_out", "removed": ["b"]}},
        }
        assert bound[1] == {"id": "b", "text": "y"}


class TestMiniLM:
    def test_scores_in_range_with_the_nearest_neighbour_left_out(
        self, minilm: MiniLMScorer
    ) -> None:
        """Every score is a cosine; each perturbation leaves out one recent segment, the one
        most like the segment scored."""
        window = [
            {"id": "task", "text": "Plan a ferry trip to the island."},
            {"id": "ferry", "text": "The ferry leaves the harbour at 07:30."},
            {"id": "boat", "text": "Return boats to the harbour run at 16:00."},
            {"id": "cake", "text": "Whisk the eggs with sugar until pale."},
        ]
        scores = minilm.score(window, "Plan a ferry trip to the island.")
        assert set(scores) == {"task", "ferry", "boat", "cake"}
        assert all(-1.0 <= v <= 1.0 for pair in scores.values() for v in pair)
        assert scores.perturbations["ferry"] == Perturbation("leave_one_out", ("boat",))
        assert scores["ferry"][0] > scores["cake"][0]
        assert isinstance(minilm, Scorer)

    def test_a_lone_segment_is_not_perturbed(self, minilm: MiniLMScorer) -> None:
        """With nothing else in the window the perturbed score is the score."""
        scores = minilm.score([{"id": "a", "text": "hello"}], "greet")
        assert scores["a"][0] == scores["a"][1]
        assert scores.perturbations["a"] == Perturbation("leave_one_out")

    def test_scoring_prints_nothing(self, capfd: pytest.CaptureFixture[str]) -> None:
        """Loading the model and scoring leave stdout and stderr alone."""
        MiniLMScorer().score([{"id": "a", "text": "quiet"}], "quiet")
        assert capfd.readouterr() == ("", "")


class TestMiniLMEmbedder:
    def test_batched_vectors_are_the_scorers_one_by_one(self, minilm: MiniLMScorer) -> None:
        """Texts of different lengths padded into one batch embed as they do alone, in order,
        unit length; a repeated text is embedded once."""
        texts = [
            "All timestamps must be UTC; never emit local time.",
            "Emit local time.",
            "The morning ferry leaves the harbour at 07:30 and the crossing takes 90 minutes.",
            "Emit local time.",
        ]
        embedder = MiniLMEmbedder(batch=2)
        vectors = embedder.embed(texts)
        assert len(vectors) == len(texts)
        for text, vector in zip(texts, vectors, strict=True):
            alone = minilm.embed(text)
            assert sum(a * b for a, b in zip(vector, alone, strict=True)) == pytest.approx(1.0)
            assert sum(x * x for x in vector) == pytest.approx(1.0)
        assert vectors[1] is vectors[3]

    def test_a_paraphrase_is_nearer_than_a_lost_negation_is_far(self) -> None:
        """The seed's UTC constraint reworded stays close; the sentence without it is far."""
        constraint, paraphrase, other = MiniLMEmbedder().embed(
            [
                "All timestamps must be UTC; never emit local time.",
                "Timestamps are UTC and local time is never emitted.",
                "The ferry leaves at 07:30.",
            ]
        )
        near = sum(a * b for a, b in zip(constraint, paraphrase, strict=True))
        far = sum(a * b for a, b in zip(constraint, other, strict=True))
        assert near > 0.8
        assert far < 0.3

    def test_the_cache_keeps_the_last_texts_only(self) -> None:
        """Past cache_size distinct texts the least recently embedded is forgotten, and a batch
        larger than the cache still gets every vector."""
        embedder = MiniLMEmbedder(cache_size=2)
        first = embedder.embed(["one", "two", "three"])
        assert len(first) == 3
        assert embedder.embed(["three"])[0] is first[2]
        assert embedder.embed(["one"])[0] is not first[0]
        assert embedder.embed(["one"])[0] == pytest.approx(first[0])

    def test_embedding_prints_nothing(self, capfd: pytest.CaptureFixture[str]) -> None:
        """Loading the model and embedding leave stdout and stderr alone."""
        MiniLMEmbedder().embed(["quiet"])
        assert capfd.readouterr() == ("", "")


def load_generator() -> Any:
    sys.path.insert(0, str(AGENTS))
    try:
        spec = importlib.util.spec_from_file_location(
            "make_minilm", AGENTS / "make_minilm_traces.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(AGENTS))
    return module


class TestExamplePolicy:
    def test_the_generator_reproduces_the_shipped_traces(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Scoring the shipped conversations again gives the shipped traces' scores (to 1e-4)."""
        monkeypatch.chdir(ROOT)
        generator = load_generator()
        assert generator.main([str(tmp_path)]) == 0
        for shipped in TRACES:
            fresh = (tmp_path / "traces" / shipped.name).read_text(encoding="utf-8").splitlines()
            old = shipped.read_text(encoding="utf-8").splitlines()
            assert len(fresh) == len(old)
            for a, b in zip(map(json.loads, fresh[1:]), map(json.loads, old[1:]), strict=True):
                assert a["scores"].keys() == b["scores"].keys()
                assert all(abs(a["scores"][k] - b["scores"][k]) < 1e-4 for k in a["scores"])

    @pytest.mark.parametrize("trace", TRACES, ids=lambda path: path.stem)
    def test_calibrated_policy_halts_only_the_injected_collapse(self, trace: Path) -> None:
        """Replayed under the fitted policy, no healthy conversation halts; the injected
        collapse does, at the cycle it starts."""
        engine = Engine.from_file(str(AGENTS / "minilm-calibrated.yaml"), logger=SilentLogger())
        summary = replay_trace(engine, str(trace))
        assert summary.complete
        if trace.stem.startswith("healthy-"):
            assert summary.first_halt is None
        else:
            assert summary.first_halt is not None
            assert summary.first_halt.cycle == 5
