"""Choosing the bundled model's backend, without loading a model: the checks that run before
anything is exported or loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from mnemonia import MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import (
    HashingEmbedder,
    SentenceTransformerEmbedder,
    as_embedder,
    default_embedder,
)
from mnemonia.embeddings.onnx import OnnxEmbedder, default_cache_dir
from mnemonia.errors import InvalidInputError, MnemoniaError, StoreError


def test_an_unknown_backend_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidInputError, match=r"'tensorrt': must be one of torch, onnx, "
                                                r"onnx-int8"):
        default_embedder("tensorrt")
    with pytest.raises(InvalidInputError, match="must be one of"):
        as_embedder(None, backend="Torch")


def test_default_embedders_are_shared_per_backend_and_cache_folder(tmp_path: Path) -> None:
    a = default_embedder("onnx", onnx_cache_dir=tmp_path)
    assert default_embedder("onnx", onnx_cache_dir=str(tmp_path)) is a
    assert default_embedder("onnx-int8", onnx_cache_dir=tmp_path) is not a
    assert default_embedder("onnx", onnx_cache_dir=tmp_path / "other") is not a
    assert isinstance(a, OnnxEmbedder) and not a.quantized
    assert default_embedder("onnx") is default_embedder()
    assert isinstance(default_embedder("torch"), SentenceTransformerEmbedder)
    assert a.name == default_embedder().name == "sentence-transformers/all-MiniLM-L6-v2"


def test_a_given_embedder_wins_over_the_backend(tmp_path: Path) -> None:
    own = HashingEmbedder()
    assert as_embedder(own, backend="onnx") is own
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", embedder_backend="onnx",
                              onnx_cache_dir=str(tmp_path / "never"))
    with MemoryEngine.open(tmp_path / "store", config=cfg, embedder=own) as engine:
        engine.add("hello there", tenant="t")
        assert engine.embedder is own
    assert not (tmp_path / "never").exists()  # nothing exported


def test_onnx_embedder_arguments_are_checked() -> None:
    for bad in ({"threads": 0}, {"batch_size": 0}, {"threads": True}, {"batch_size": 2.0},
                {"batch_workers": 0}, {"batch_workers": 1.5}):
        with pytest.raises(MnemoniaError, match="must be an integer >= 1"):
            OnnxEmbedder(**bad)  # type: ignore[arg-type]


def test_an_unwritable_cache_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    emb = OnnxEmbedder(cache_dir=blocker / "cache")
    with pytest.raises(StoreError, match=r"cannot write the ONNX model cache .*a-file.*"
                                         r"onnx_cache_dir \(MNEMONIA_ONNX_CACHE_DIR\)"):
        emb.embed_query("hello")
    assert blocker.read_text() == "not a folder"


def test_default_cache_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "mnemonia" / "onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mnemonia" / "onnx"


def test_onnx_threads_and_batch_workers_follow_the_cpus(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A query runs on the process's CPUs (at most two intra-op threads); a list is spread
    over as many runs at once as the CPUs left over hold (at most two), so two CPUs give one
    run on two threads, and a one-thread session gets two runs."""
    import mnemonia.embeddings.onnx as onnx_module

    for cpus, threads, workers, one_thread_workers in ((1, 1, 1, 1), (2, 2, 1, 2),
                                                       (4, 2, 2, 2), (16, 2, 2, 2)):
        monkeypatch.setattr(onnx_module, "_cpus", lambda n=cpus: n)
        emb = OnnxEmbedder()
        assert (emb._threads, emb.batch_workers) == (threads, workers), cpus
        assert OnnxEmbedder(threads=1).batch_workers == one_thread_workers, cpus
        assert OnnxEmbedder(threads=3, batch_workers=5).batch_workers == 5
