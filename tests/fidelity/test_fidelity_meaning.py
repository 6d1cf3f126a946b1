"""The meaning method: sentence boundaries, per-sentence similarities, and MiniLM on the seed."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prunewarden.fidelity import (
    Embedder,
    FidelitySettings,
    check_fidelity,
    sentence_similarities,
    sentences,
)
from prunewarden.scoring.embed import MiniLMEmbedder

UTC = "All timestamps must be UTC; never emit local time."


class _Axes:
    """Each text is the unit vector of the first word it starts with among three known ones."""

    AXES = ("ferry", "bread", "deploy")

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(t.lower().startswith(axis)) for axis in self.AXES] for t in texts]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


class TestSentences:
    def test_versions_paths_and_decimals_stay_inside_their_sentence(self) -> None:
        """A dot inside v2.3.1, src/app.py or 0.5 ends nothing; a dot, ? or ! before a space
        does, and so do a semicolon and a line break."""
        text = "Bump to v2.3.1 in src/app.py. Wait 0.5 s? Yes!\nDone; never skip."
        assert sentences(text) == [
            "Bump to v2.3.1 in src/app.py.",
            "Wait 0.5 s?",
            "Yes!",
            "Done;",
            "never skip.",
        ]

    def test_blank_text_has_no_sentence(self) -> None:
        """Whitespace alone yields no sentence."""
        assert sentences("  \n ") == []


class TestSimilarities:
    def test_each_parent_sentence_gets_its_best_cosine_in_one_call(self) -> None:
        """Per parent in order, each sentence's best cosine to any child sentence; every text
        of the check goes to the embedder in one call, the child's first."""
        embedder = _Axes()
        assert isinstance(embedder, Embedder)
        parents = [("m1", "Ferry at 07:30. Bread at 9."), ("m2", "Deploy v2.")]
        found = sentence_similarities(parents, "Bread first. Ferry later.", embedder)
        assert found == [("m1", [1.0, 1.0]), ("m2", [0.0])]
        assert embedder.calls == [
            ["Bread first.", "Ferry later.", "Ferry at 07:30.", "Bread at 9.", "Deploy v2."]
        ]

    def test_drift_names_the_parent_without_a_near_sentence(self) -> None:
        """meaning_drift for the parent whose sentence has no near child sentence, with ids and
        the kind lost in its detail."""
        settings = FidelitySettings(method="embedding", embedding_floor=0.5)
        parents = [("m1", "Ferry at 07:30."), ("m2", "Deploy v2.")]
        result = check_fidelity(parents, ("s1", "Ferry at 07:30."), settings, embedder=_Axes())
        assert [(r.code, r.detail) for r in result.reasons] == [
            ("meaning_drift", {"parent": "m2", "child": "s1", "lost": ["meaning"]})
        ]


class TestMiniLMOnTheSeed:
    def test_a_paraphrase_is_kept_and_a_dropped_clause_drifts(self, minilm: MiniLMEmbedder) -> None:
        """With MiniLM at a floor of 0.6, the seed's UTC constraint reworded keeps its meaning;
        a summary that drops the constraint's clause drifts."""
        settings = FidelitySettings(method="embedding", embedding_floor=0.6)
        parents = [("m3", UTC)]
        kept = ("s1", "Timestamps are always UTC; local time is never emitted.")
        dropped = ("s2", "All timestamps must be UTC.")
        assert check_fidelity(parents, kept, settings, embedder=minilm).reasons == ()
        result = check_fidelity(parents, dropped, settings, embedder=minilm)
        assert [r.code for r in result.reasons] == ["meaning_drift"]
