"""Embedders: the bundled all-MiniLM-L6-v2, a deterministic hashing embedder for fast tests,
and wrappers that accept any LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``.

Every embedder returns L2-normalised float32 rows, so a dot product is the cosine.

The package: :mod:`~mnemonia.embeddings.base` (the protocols, the hashing and wrapping
embedders, the query cache), :mod:`~mnemonia.embeddings.sentence_transformers` (the ``torch``
backend), :mod:`~mnemonia.embeddings.onnx` (the ``onnx`` and ``onnx-int8`` backends) and, here,
the factory choosing among them. The submodules never import this one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mnemonia.config import DEFAULT_EMBEDDER_BACKEND, EMBEDDER_BACKENDS
from mnemonia.embeddings.base import (
    DEFAULT_MODEL_NAME,
    CallableEmbedder,
    Embedder,
    HashingEmbedder,
    QueryCache,
    Reranker,
    bundled_model_path,
    quiet_offline_environment,
)
from mnemonia.embeddings.base import normalise_rows as normalise_rows
from mnemonia.embeddings.sentence_transformers import SentenceTransformerEmbedder
from mnemonia.errors import InvalidInputError, MnemoniaError, shown

__all__ = [
    "DEFAULT_MODEL_NAME",
    "CallableEmbedder",
    "Embedder",
    "HashingEmbedder",
    "QueryCache",
    "Reranker",
    "SentenceTransformerEmbedder",
    "as_embedder",
    "as_reranker",
    "bundled_model_path",
    "default_embedder",
    "quiet_offline_environment",
]


_DEFAULTS: dict[tuple[str, str | None], Embedder] = {}
_DEFAULT_LOCK = threading.Lock()


def default_embedder(backend: str = DEFAULT_EMBEDDER_BACKEND, *,
                     onnx_cache_dir: str | os.PathLike[str] | None = None) -> Embedder:
    """The process-wide bundled all-MiniLM-L6-v2 embedder of ``backend``.

    ``"torch"``: sentence-transformers (:class:`SentenceTransformerEmbedder`); ``"onnx"`` and
    ``"onnx-int8"``: the same weights through ONNX Runtime, exported once into
    ``onnx_cache_dir`` (default :func:`mnemonia.embeddings.onnx.default_cache_dir`), the second
    with int8 weights (:class:`~mnemonia.embeddings.onnx.OnnxEmbedder`). All three carry the same
    model name, so a store made with one opens with the others.
    """
    if not isinstance(backend, str) or backend not in EMBEDDER_BACKENDS:
        raise InvalidInputError(f"embedder backend {shown(backend)}: must be one of "
                                f"{', '.join(EMBEDDER_BACKENDS)}")
    folder = None
    if backend != "torch" and onnx_cache_dir is not None:
        folder = str(Path(onnx_cache_dir).expanduser().resolve())
    with _DEFAULT_LOCK:
        emb = _DEFAULTS.get((backend, folder))
        if emb is None:
            if backend == "torch":
                emb = SentenceTransformerEmbedder()
            else:
                from mnemonia.embeddings.onnx import OnnxEmbedder

                emb = OnnxEmbedder(quantized=backend == "onnx-int8", cache_dir=folder)
            _DEFAULTS[(backend, folder)] = emb
        return emb


def as_reranker(obj: Any | None) -> Reranker | None:
    """A reranker from a sentence-transformers ``CrossEncoder`` (its raw logits) or any
    ``(query, texts) -> scores`` callable (scores taken as logits); ``None`` stays ``None``."""
    if obj is None:
        return None
    predict = getattr(obj, "predict", None)
    if callable(predict):
        import inspect

        import torch

        # raw logits: sentence-transformers calls the option activation_fn (>= 4) or
        # activation_fct (3.x)
        params = inspect.signature(predict).parameters
        raw = {("activation_fn" if "activation_fn" in params else "activation_fct"):
               torch.nn.Identity()}

        def cross_encoder(query: str, texts: Sequence[str]) -> list[float]:
            out = predict([(query, t) for t in texts], show_progress_bar=False,
                          convert_to_numpy=True, **raw)
            logits = np.asarray(out, dtype=np.float64).reshape(len(texts), -1)[:, 0]
            return [float(x) for x in logits]
        return cross_encoder
    if callable(obj):
        def scorer(query: str, texts: Sequence[str]) -> list[float]:
            out = list(obj(query, list(texts)))
            if len(out) != len(texts):
                raise MnemoniaError(f"the reranker returned {len(out)} scores for {len(texts)} "
                                    "texts; it must return one score per text")
            return [float(x) for x in out]
        return scorer
    raise InvalidInputError(
        f"rerank={obj!r}: must be a sentence-transformers CrossEncoder or a callable "
        "(query, texts) -> scores")


def as_embedder(obj: Any | None, *, backend: str = DEFAULT_EMBEDDER_BACKEND,
                onnx_cache_dir: str | os.PathLike[str] | None = None) -> Embedder:
    """Turn ``None`` (the bundled model on ``backend``, see :func:`default_embedder`), an
    :class:`Embedder`, or a framework model into one (``backend`` only applies to ``None``)."""
    if obj is None:
        return default_embedder(backend, onnx_cache_dir=onnx_cache_dir)
    if isinstance(obj, SentenceTransformerEmbedder | HashingEmbedder | CallableEmbedder):
        return obj
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query") and hasattr(obj, "name") \
            and hasattr(obj, "dimension"):
        return obj  # type: ignore[no-any-return]
    return CallableEmbedder(obj)
