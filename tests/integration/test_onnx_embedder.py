"""The ONNX backend of the bundled all-MiniLM-L6-v2: a real export into a temporary cache,
compared with the sentence-transformers vectors; the cache reused, re-made when damaged, shared
by two processes; an engine on it reading a store the torch backend made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings.onnx import OnnxEmbedder, model_key

pytestmark = pytest.mark.integration

_START = datetime(2025, 1, 1, 9, tzinfo=UTC)

TEXTS = [
    "",
    "   ",
    "a",
    "?!",
    "Caroline said, \"I went to a LGBTQ support group yesterday and it was so powerful.\"",
    "Melanie said, \"Sounds great!\" and shared a photo of a sunset over the lake",
    "The hotel booking code for the offsite is QX-4471; check-in 15:00, 12/05/2025.",
    "Übermorgen fährt Zoë nach Köln. Ça va? ñandú",
    "東京で会いましょう。明日は雨です。",
    "مرحبا بالعالم",
    "emoji only 🎉🙂👍🏽",
    "tabs\tand\nnew\nlines",
    "UPPER CASE and lower case",
    "word " * 600,  # far over 256 tokens
    ("A long memory about the garden, the roses, the tomatoes and the weather. " * 200)[:16000],
    "the same text twice",
    "the same text twice",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx(cache: Path) -> OnnxEmbedder:
    emb = OnnxEmbedder(cache_dir=cache)
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="module")
def onnx_int8(cache: Path, onnx: OnnxEmbedder) -> OnnxEmbedder:
    emb = OnnxEmbedder(cache_dir=cache, quantized=True)
    emb.embed_query("warm up")
    return emb


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(a * b, axis=1))


def test_export_made_one_verified_file(onnx: OnnxEmbedder, cache: Path) -> None:
    assert onnx.exported == ["float32"] and onnx.export_seconds > 0
    from mnemonia.embeddings import bundled_model_path

    folder = cache / model_key(bundled_model_path())
    assert onnx.path == folder / "model.onnx"
    manifest = json.loads((folder / "model.json").read_text())
    assert manifest["max_seq_length"] == 256 and manifest["dimension"] == 384
    assert manifest["probe_min_cosine"] >= 0.9999
    # traced with eager attention, so ONNX Runtime fused each of the 6 layers' attention
    assert manifest["fused"]["Attention"] == 6
    assert manifest["fused"]["SkipLayerNormalization"] == 12
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "model.json", "model.onnx"]


def test_onnx_vectors_agree_with_torch(onnx: OnnxEmbedder, real_embedder) -> None:  # type: ignore[no-untyped-def]
    want = real_embedder.embed_documents(TEXTS)
    got = onnx.embed_documents(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert _cosines(got, want).min() >= 0.999
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    queries = np.stack([onnx.embed_query(t) for t in TEXTS])
    assert _cosines(queries, want).min() >= 0.999
    assert onnx.dimension == real_embedder.dimension == 384
    assert onnx.name == real_embedder.name


def test_the_session_runs_on_the_default_threads_without_spinning(onnx: OnnxEmbedder
                                                                  ) -> None:
    """The loaded session has the embedder's intra-op threads (default: the CPUs, at most
    two) and a pool that never spins (an idle thread would take the core recall's keyword
    side and the writer thread need)."""
    from mnemonia.embeddings.onnx import default_threads

    opts = onnx._load()[0].get_session_options()
    assert opts.intra_op_num_threads == default_threads() == onnx._threads
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_embed_documents_keeps_the_input_order(onnx: OnnxEmbedder) -> None:
    forward = onnx.embed_documents(TEXTS)
    order = [13, 0, 8, 4, 14, 2, 16, 1, 9, 3, 12, 5, 15, 6, 11, 7, 10]
    assert sorted(order) == list(range(len(TEXTS)))
    shuffled = onnx.embed_documents([TEXTS[i] for i in order])
    assert np.allclose(shuffled, forward[order], atol=1e-5)
    one_by_one = np.stack([onnx.embed_query(t) for t in TEXTS])
    assert _cosines(forward, one_by_one).min() >= 0.99999
    assert onnx.embed_documents([]).shape == (0, 384)
    # with batches smaller than the list: the sorting spans batches
    small = OnnxEmbedder(cache_dir=Path(str(onnx.path)).parents[1], batch_size=3)
    assert np.allclose(small.embed_documents(TEXTS), forward, atol=1e-5)


def test_batches_embedded_at_once_keep_the_order(onnx: OnnxEmbedder) -> None:
    """``batch_workers`` batches run at once, on the calling thread and one thread per other
    worker; the rows still come back in the input's order, with the vectors one batch at a
    time gives. A failing batch's error reaches the caller."""
    assert onnx.path is not None
    cache = Path(str(onnx.path)).parents[1]
    serial = OnnxEmbedder(cache_dir=cache, batch_size=4, batch_workers=1)
    wide = OnnxEmbedder(cache_dir=cache, batch_size=4, batch_workers=3)
    session, tokens, manifest = wide._load()
    threads: set[str] = set()

    class Recording:  # the real session, noting which thread runs each batch
        def get_inputs(self):  # type: ignore[no-untyped-def]
            return session.get_inputs()

        def run(self, *args):  # type: ignore[no-untyped-def]
            threads.add(threading.current_thread().name)
            return session.run(*args)

    wide._state = (Recording(), tokens, manifest)
    texts = [TEXTS[i % len(TEXTS)] + f" ({i})" for i in range(40)]
    got = wide.embed_documents(texts)
    assert np.allclose(got, serial.embed_documents(texts), atol=1e-5)
    caller = threading.current_thread().name
    assert threads == {caller, "mnemonia-embed-1", "mnemonia-embed-2"}
    # a list shorter than a batch is still spread over the workers; a query is one run
    threads.clear()
    assert np.allclose(wide.embed_documents(TEXTS[:2]), serial.embed_documents(TEXTS[:2]),
                       atol=1e-5)
    assert threads == {caller, "mnemonia-embed-1"}
    threads.clear()
    wide.embed_query(TEXTS[0])
    assert threads == {caller}

    class Failing(Recording):
        def run(self, *args):  # type: ignore[no-untyped-def]
            if threading.current_thread().name != caller:
                raise RuntimeError("a helper's batch failed")
            return session.run(*args)

    wide._state = (Failing(), tokens, manifest)
    with pytest.raises(RuntimeError, match="a helper's batch failed"):
        wide.embed_documents(texts)


def test_int8_variant_is_close_and_made_from_the_float_file(
        onnx_int8: OnnxEmbedder, real_embedder) -> None:  # type: ignore[no-untyped-def]
    assert onnx_int8.exported == ["int8"]  # the float export was reused
    assert onnx_int8.path is not None and onnx_int8.path.name == "model-int8.onnx"
    assert sorted(p.name for p in onnx_int8.path.parent.iterdir()) == [
        ".lock", "model-int8.json", "model-int8.onnx", "model.json", "model.onnx"]
    cos = _cosines(onnx_int8.embed_documents(TEXTS), real_embedder.embed_documents(TEXTS))
    assert cos.min() >= 0.95 and cos.mean() >= 0.98
    assert onnx_int8.name == real_embedder.name


def test_a_second_embedder_reuses_the_cache(onnx: OnnxEmbedder, cache: Path) -> None:
    assert onnx.path is not None
    before = onnx.path.stat().st_mtime_ns
    again = OnnxEmbedder(cache_dir=cache)
    assert np.array_equal(again.embed_documents(TEXTS[:5]), onnx.embed_documents(TEXTS[:5]))
    assert again.exported == [] and again.path == onnx.path
    assert onnx.path.stat().st_mtime_ns == before


@pytest.mark.parametrize("damage", ["truncated", "bytes changed", "manifest missing"])
def test_a_damaged_cache_is_exported_again(onnx: OnnxEmbedder, tmp_path: Path,
                                           damage: str) -> None:
    assert onnx.path is not None
    copy = tmp_path / "cache" / onnx.path.parent.name
    shutil.copytree(onnx.path.parent, copy)
    model = copy / "model.onnx"
    blob = bytearray(model.read_bytes())
    if damage == "truncated":
        model.write_bytes(blob[: len(blob) // 2])
    elif damage == "bytes changed":
        blob[len(blob) // 2: len(blob) // 2 + 64] = bytes(64)
        model.write_bytes(bytes(blob))
    else:
        (copy / "model.json").unlink()
    emb = OnnxEmbedder(cache_dir=tmp_path / "cache")
    got = emb.embed_documents(TEXTS[:6])
    assert emb.exported == ["float32"] and emb.path == model
    assert _cosines(got, onnx.embed_documents(TEXTS[:6])).min() >= 0.99999
    assert json.loads((copy / "model.json").read_text())["bytes"] == model.stat().st_size
    assert not [p.name for p in copy.iterdir() if p.name.startswith(".tmp-")]


_EXPORT = """
import sys
import threading
from mnemonia.embeddings.onnx import OnnxEmbedder
emb = OnnxEmbedder(cache_dir=sys.argv[1])
vec = emb.embed_query("two processes, one cache")
print(",".join(emb.exported) or "-", round(float(vec @ vec), 4))
"""


@pytest.mark.slow
def test_two_processes_export_once_into_an_empty_cache(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", _EXPORT, str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    said = sorted(out.split() for out, _ in outs)
    assert said == [["-", "1.0"], ["float32", "1.0"]]  # one exported, the other reused it
    (folder,) = tmp_path.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "model.json", "model.onnx"]


@pytest.fixture
def torch_store(tmp_path: Path, real_embedder) -> Iterator[tuple[Path, list[str]]]:  # type: ignore[no-untyped-def]
    path = tmp_path / "store"
    notes = ["The quarterly planning offsite is in Porto from May 12 to May 14.",
             "Dana's flight to Porto lands at 18:40 on May 11.",
             "The hotel booking code for the offsite is QX-4471.",
             "Our espresso machine needs a new gasket."]
    cfg = MnemoniaConfig.load(env={}, maintenance="manual")
    with MemoryEngine.open(path, config=cfg, embedder=real_embedder,
                           clock=ManualClock(_START)) as engine:
        ids = [m.id for m in engine.add_many([{"text": t} for t in notes], tenant="team")]
    yield path, ids


def test_an_engine_on_onnx_reads_a_torch_store_and_adds_to_it(
        torch_store: tuple[Path, list[str]], onnx: OnnxEmbedder, cache: Path) -> None:
    path, ids = torch_store
    cfg = MnemoniaConfig.load(env={}, maintenance="manual", embedder_backend="onnx",
                              onnx_cache_dir=str(cache))
    with MemoryEngine.open(path, config=cfg, clock=ManualClock(_START)) as engine:
        assert isinstance(engine.embedder, OnnxEmbedder) and not engine.embedder.quantized
        assert engine.embedder.exported == []  # the module's export, from the cache
        assert engine.recall("what's the hotel booking code?", tenant="team", k=1).ids == \
            [ids[2]]
        new = engine.add("The espresso machine was repaired on Friday.", tenant="team")
        res = engine.recall("Is the coffee machine fixed?", tenant="team", k=2)
        assert new.id in res.ids
        assert {engine.get(i, tenant="team").embedding_model for i in [*ids, new.id]} == {
            "sentence-transformers/all-MiniLM-L6-v2"}
    cfg_int8 = cfg.replace(embedder_backend="onnx-int8")
    with MemoryEngine.open(path, config=cfg_int8, clock=ManualClock(_START)) as engine:
        assert isinstance(engine.embedder, OnnxEmbedder) and engine.embedder.quantized
        assert engine.recall("flight arrival time in Porto", tenant="team", k=1).ids == [ids[1]]
