"""The bundled all-MiniLM-L6-v2 run by ONNX Runtime: exported locally from the bundled weights
once, cached, never downloaded.

The export (``torch.onnx.export``, TorchScript exporter, opset 17) puts the transformer, the
mean pooling over real tokens and the L2 normalisation in one graph, so a query is one
tokenizer call (the model's own ``tokenizer.json``, truncated at the model's
``max_seq_length``) and one ``session.run``; torch is imported only while exporting. The
transformer is traced with its plain ("eager") attention, whose graph ONNX Runtime's BERT
optimizer fuses into one ``Attention`` node per layer (plus ``SkipLayerNormalization``,
``BiasGelu`` and ``EmbedLayerNormalization``; the ``sdpa`` attention's graph does not fuse):
see :data:`EXPORT_FORMAT` for what that saves. Before a file is kept, its vectors of a few
probe texts are compared with the sentence-transformers ones (``onnx-int8``: with the float
export's).

Cache layout: ``<cache_dir>/<model key>/model.onnx`` (and ``model-int8.onnx``), each with a
``.json`` manifest holding its SHA-256. The model key hashes the model folder's files and the
export format, so other weights or another export recipe get another folder. Files are written
to a temporary name and renamed into place, under an exclusive lock on ``<key>/.lock`` (two
processes never export at once; the second finds the first one's file). A file that is
missing, or whose bytes do not match its manifest (truncated, damaged), is exported again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mnemonia.embeddings.base import (
    DEFAULT_MODEL_NAME,
    bundled_model_path,
    quiet_offline_environment,
)
from mnemonia.embeddings.sentence_transformers import SentenceTransformerEmbedder
from mnemonia.errors import MissingDependencyError, MnemoniaError, StoreError

__all__ = ["EXPORT_FORMAT", "MAX_DEFAULT_THREADS", "OPSET", "OnnxEmbedder",
           "default_batch_workers", "default_cache_dir", "default_threads", "model_key"]

EXPORT_FORMAT = 2
"""Version of the export recipe (graph, inputs, manifest); a change gets a new cache folder.
Format 2 (2026-11-30) traces eager attention and fuses the graph (:func:`_fuse`): on the
2-core development machine, 300 token sequences of 8-25 tokens, ``session.run`` on two
non-spinning threads, the formats in turns sequence by sequence (four rounds), p50 4.03 ms
against 4.57 ms for format 1 (paired median ratio 0.884; vectors within 2.3e-7 of format
1's); on one thread both 6.4-6.8 ms (``docs/benchmarks/speed.md``)."""
OPSET = 17
MAX_DEFAULT_THREADS = 2
"""ONNX Runtime intra-op threads by default: the CPUs the process may use, at most this many
(:func:`default_threads`). Their pool never spins (``session.intra_op.allow_spinning`` 0): an
idle helper thread waits instead of burning the core that recall's keyword side, the writer
thread or another process needs. On the 2-core development machine (2026-11-29, seventh
session, 300 queries of the speed corpus, 15.6 tokens on average, ``session.run`` alone) a
query took p50 3.9 ms on two non-spinning threads against 5.4-5.5 ms on one (two spinning:
3.1 ms, but slower inside recall); beside two busy processes p50 5.9-6.1 / p95 9.1-9.6 ms
against 5.8-9.2 / 13.9-14.1 ms on one; a real recall of the enriched 10k store p50
10.1-10.8 ms against 11.2-12.1 ms. (An earlier session, on a slower and busier machine,
measured two threads slower inside recall and kept one: ``docs/benchmarks/speed.md``.)"""
DEFAULT_BATCH_SIZE = 64
MAX_DEFAULT_BATCH_WORKERS = 2
"""Concurrent ``session.run`` calls for a list of texts, by default at most this many: the
process's CPUs over the session's intra-op threads (:func:`default_batch_workers`; one when
the threads cover the CPUs: on the 2-core development machine, 2026-11-29, seventh session,
500 texts, one run on two threads embeds 535-539 texts/s against 531-549 for two runs on one
thread each and 448-463 for two runs on two threads each). With one intra-op thread each
call runs on its own thread: on the 2-core development machine (2026-11-29, 500 texts of
the speed corpus) two calls embed 250-277 texts/s against 128-133 for one; beside two busy
processes 116-139 against 78-82; ``add_many`` of 1,000 memories on the 10k store 122-125
against 76-83 memories/s. More than two is not measured (no larger machine here)."""
PROBES = (
    "",
    "Caroline said, \"I went to a LGBTQ support group yesterday and it was so powerful.\"",
    "Quarterly planning offsite: Porto, May 12-14. Hotel code QX-4471.",
    "Übermorgen fährt Zoë nach Köln; 東京で会いましょう 🎉",
    "the " * 400,
)
"""Texts whose export vectors are compared with the reference before a file is kept."""
MIN_PROBE_COSINE = {False: 0.9999, True: 0.95}
"""Lowest cosine accepted on the probes: float export against sentence-transformers, int8
against the float export."""
_HASHED_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model")
_SKIPPED_FILES = ("README.md", "data_config.json")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/mnemonia/onnx``, else ``~/.cache/mnemonia/onnx``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "mnemonia" / "onnx"


def model_key(model_dir: Path) -> str:
    """16 hex digits of SHA-256 over the export format, the opset and the model folder's
    weights, configs and tokenizer files (names and bytes)."""
    h = hashlib.sha256(f"mnemonia-onnx/{EXPORT_FORMAT}/opset{OPSET}".encode())
    files = sorted(p for p in model_dir.rglob("*") if p.is_file()
                   and p.suffix in _HASHED_SUFFIXES and p.name not in _SKIPPED_FILES)
    if not files:
        raise MnemoniaError(f"no model files in {str(model_dir)!r}")
    for p in files:
        h.update(p.relative_to(model_dir).as_posix().encode() + b"\0")
        with open(p, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class _Cached:
    """A verified model file: its bytes and its manifest."""

    blob: bytes
    manifest: dict[str, Any]


def _read_verified(path: Path) -> _Cached | None:
    """The file and its manifest when both are there and agree (size, SHA-256, format)."""
    try:
        manifest = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        blob = path.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT \
            or manifest.get("bytes") != len(blob) \
            or manifest.get("sha256") != hashlib.sha256(blob).hexdigest():
        return None
    return _Cached(blob, manifest)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder/.lock`` (blocks while another process exports)."""
    with open(folder / ".lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _temp_path(folder: Path, suffix: str) -> Iterator[Path]:
    """A fresh temporary file name in ``folder``, removed on leaving if still there."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _commit(tmp: Path, dest: Path, manifest: dict[str, Any]) -> None:
    """Move the finished ``tmp`` to ``dest`` and write its manifest, each by an atomic rename
    (a reader sees the old file, the new one, or a mismatch it treats as missing)."""
    blob = tmp.read_bytes()
    manifest = {"format": EXPORT_FORMAT, "bytes": len(blob),
                "sha256": hashlib.sha256(blob).hexdigest(), **manifest}
    with _temp_path(dest.parent, ".json.tmp") as tmp_manifest:
        tmp_manifest.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        for done in (tmp, tmp_manifest):  # mkstemp's files are private; a cache is not
            os.chmod(done, 0o644)
        os.replace(tmp, dest)
        os.replace(tmp_manifest, dest.with_suffix(".json"))


def _import_runtime() -> tuple[Any, Any]:
    try:
        import onnxruntime
        import tokenizers
    except ImportError as e:  # pragma: no cover - hard dependencies
        raise MissingDependencyError(
            "the onnx embedder backend needs onnxruntime and tokenizers: "
            "pip install onnxruntime tokenizers") from e
    return onnxruntime, tokenizers


def _make_session(blob: bytes, threads: int) -> Any:
    ort, _ = _import_runtime()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see MAX_DEFAULT_THREADS
    return ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])


class _Tokens:
    """The model's own fast tokenizer (``tokenizer.json``), truncating as the model does."""

    def __init__(self, model_dir: Path, max_length: int, pad_id: int) -> None:
        _, tokenizers = _import_runtime()
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise MnemoniaError(f"the onnx embedder needs {str(path)!r} (a fast tokenizer)")
        self._tok = tokenizers.Tokenizer.from_file(str(path))
        self._tok.no_padding()  # tokenizer.json may pad every text to a fixed length
        self._tok.enable_truncation(max_length=max_length)
        self._pad = pad_id

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts))]

    def feeds(self, rows: Sequence[Sequence[int]], names: Sequence[str]) -> dict[str, Any]:
        """Padded ``input_ids`` / ``attention_mask`` (/ zero ``token_type_ids``)."""
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        out = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            out["token_type_ids"] = np.zeros_like(ids)
        return out


def _cpus() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not every platform has affinity
        return os.cpu_count() or 1


def default_threads() -> int:
    """The CPUs this process may use, at most :data:`MAX_DEFAULT_THREADS`."""
    return max(1, min(MAX_DEFAULT_THREADS, _cpus()))


def default_batch_workers(threads: int = 1) -> int:
    """The CPUs this process may use over ``threads`` (each run's intra-op threads), at
    least one, at most :data:`MAX_DEFAULT_BATCH_WORKERS`."""
    return max(1, min(MAX_DEFAULT_BATCH_WORKERS, _cpus() // max(1, threads)))


def _run(session: Any, tokens: _Tokens, texts: Sequence[str], batch_size: int,
         workers: int = 1) -> np.ndarray:
    """Vectors of ``texts`` in their order, computed in batches of similar token counts (a
    short text never waits on a long one's padding); with ``workers`` > 1 that many batches
    run at once, each worker on its own thread (ONNX Runtime runs a session from several
    threads and lets go of the GIL), the texts spread over at least ``workers`` batches."""
    if not texts:
        raise MnemoniaError("no texts to embed")
    names = [i.name for i in session.get_inputs()]
    rows = tokens.ids(texts)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    size = max(1, min(batch_size, -(-len(order) // workers)))
    batches = [order[start:start + size] for start in range(0, len(order), size)]

    # batch i goes to worker i % workers (the batches are sorted by length, so each worker
    # gets a like share); worker 0 is the calling thread, each other one a thread of its own
    vectors: list[Any] = [None] * len(batches)
    failed: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(w, len(batches), workers):
                vectors[i] = session.run(None, tokens.feeds([rows[j] for j in batches[i]],
                                                            names))[0]
        except BaseException as e:  # raised again on the calling thread
            failed.append(e)

    helpers = [threading.Thread(target=work, args=(w,), name=f"mnemonia-embed-{w}", daemon=True)
               for w in range(1, min(workers, len(batches)))]
    for t in helpers:
        t.start()
    work(0)
    for t in helpers:
        t.join()
    if failed:
        raise failed[0]
    out = np.empty((len(rows), vectors[0].shape[1]), dtype=np.float32)
    for idx, vecs in zip(batches, vectors, strict=True):
        out[idx] = vecs
    return out


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.min(np.sum(a * b, axis=1)))


def _pooled_module(torch: Any, transformer: Any) -> Any:
    """The transformer with mean pooling over real tokens and L2 normalisation."""
    class Pooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any,
                    token_type_ids: Any = None) -> Any:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                      **extra).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return Pooled().eval()


def _check_architecture(model: Any, model_dir: Path) -> None:
    """Only a Transformer -> mean Pooling -> Normalize model is exported as such."""
    kinds = [type(m).__name__ for m in model]
    pooling: Any = model[1] if len(model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers >= 6
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):  # 3.x - 5.x
        mode = pooling.get_pooling_mode_str()
    mean = mode in ("mean", ("mean",))
    if kinds != ["Transformer", "Pooling", "Normalize"] or not mean:
        raise MnemoniaError(
            f"the onnx embedder exports Transformer -> mean Pooling -> Normalize models; "
            f"{str(model_dir)!r} is {' -> '.join(kinds)}")


def _export_float(model_dir: Path, dest: Path) -> dict[str, Any]:
    """Export the model at ``model_dir`` to ``dest`` (atomically); its manifest fields."""
    t0 = time.perf_counter()
    try:
        import torch
    except ImportError as e:  # pragma: no cover - a hard dependency
        raise MissingDependencyError("exporting the model needs torch") from e
    model = SentenceTransformerEmbedder(str(model_dir)).model  # this export's own instance
    _check_architecture(model, model_dir)
    want = model.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)  # the reference, with the model's attention
    transformer = model[0].auto_model
    _eager_attention(transformer)
    tok = model.tokenizer
    sample = tok(["a probe", "a longer probe sentence"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    axes: dict[str, dict[int, str]] = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["embedding"] = {0: "batch"}
    fields: dict[str, Any] = {
        "variant": "float32", "max_seq_length": int(model.max_seq_length),
        "pad_id": int(tok.pad_token_id or 0), "inputs": names, "opset": OPSET,
        "torch": torch.__version__}
    with _temp_path(dest.parent, ".traced.onnx.tmp") as traced, \
            _temp_path(dest.parent, ".onnx.tmp") as tmp:
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")  # tracer and exporter deprecation notes
                torch.onnx.export(_pooled_module(torch, transformer),
                                  tuple(sample[n] for n in names), str(traced),
                                  input_names=names, output_names=["embedding"],
                                  dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        except Exception as e:
            raise MnemoniaError(f"exporting {str(model_dir)!r} to ONNX failed: {e}") from e
        fields["fused"] = _fuse(traced, tmp, transformer.config)
        tokens = _Tokens(model_dir, fields["max_seq_length"], fields["pad_id"])
        got = _run(_make_session(tmp.read_bytes(), 1), tokens, PROBES, DEFAULT_BATCH_SIZE)
        fields["probe_min_cosine"] = _check_probes(got, want, quantized=False)
        fields["dimension"] = int(got.shape[1])
        fields["export_seconds"] = round(time.perf_counter() - t0, 3)
        _commit(tmp, dest, fields)
    return fields


def _eager_attention(transformer: Any) -> None:
    """Have ``transformer`` compute attention by its plain matrix products (the graph ONNX
    Runtime fuses) instead of ``sdpa``: by ``set_attn_implementation`` where transformers
    has it, else by the config field older releases read (the oldest had eager only)."""
    switch = getattr(transformer, "set_attn_implementation", None)
    if switch is not None:
        switch("eager")
    else:
        transformer.config._attn_implementation = "eager"  # noqa: SLF001 - no public switch there


def _fuse(source: Path, dest: Path, config: Any) -> dict[str, int]:
    """Write ``source`` with ONNX Runtime's BERT fusions applied to ``dest``; the counts of
    the fused operators made (empty when no pattern matched: the graph is then written
    unfused, and checked against the probes like any other)."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:  # pragma: no cover - onnx, onnxruntime and torch's sympy are there
        raise MissingDependencyError(
            f"fusing the ONNX export needs onnxruntime's transformer tools: {e}") from e
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fused = optimize_model(str(source), model_type="bert",
                                   num_heads=int(config.num_attention_heads),
                                   hidden_size=int(config.hidden_size), opt_level=0)
            fused.save_model_to_file(str(dest))
    except Exception as e:  # the optimizer raises its own types
        raise MnemoniaError(f"fusing the ONNX export failed: {e}") from e
    return {k: int(v) for k, v in fused.get_fused_operator_statistics().items() if v}


def _check_probes(got: np.ndarray, want: np.ndarray, *, quantized: bool) -> float:
    cos = _min_cosine(got, np.asarray(want, dtype=np.float32))
    if not cos >= MIN_PROBE_COSINE[quantized]:
        raise MnemoniaError(
            f"the ONNX export disagrees with its reference: lowest probe cosine {cos:.6f} < "
            f"{MIN_PROBE_COSINE[quantized]} (not cached)")
    return round(cos, 7)


def _quantize(model_dir: Path, source: _Cached, dest: Path) -> dict[str, Any]:
    """The int8 variant of the float export ``source`` (dynamic quantization, int8 weights
    per channel with a reduced range, as recommended for CPUs without VNNI)."""
    t0 = time.perf_counter()
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as e:  # pragma: no cover - onnx is a dependency
        raise MissingDependencyError("the onnx-int8 backend needs onnx: pip install onnx") from e
    fields = {k: source.manifest[k]
              for k in ("max_seq_length", "pad_id", "inputs", "opset", "dimension")}
    fields["variant"] = "int8"
    with _temp_path(dest.parent, ".f32.onnx.tmp") as f32, \
            _temp_path(dest.parent, ".pre.onnx.tmp") as pre, \
            _temp_path(dest.parent, ".onnx.tmp") as tmp:
        f32.write_bytes(source.blob)
        quant_pre_process(str(f32), str(pre), skip_symbolic_shape=True)
        quantize_dynamic(str(pre), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True,  # fused nodes' outputs have no inferred type:
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        tokens = _Tokens(model_dir, fields["max_seq_length"], fields["pad_id"])
        got = _run(_make_session(tmp.read_bytes(), 1), tokens, PROBES, DEFAULT_BATCH_SIZE)
        want = _run(_make_session(source.blob, 1), tokens, PROBES, DEFAULT_BATCH_SIZE)
        fields["probe_min_cosine"] = _check_probes(got, want, quantized=True)
        fields["export_seconds"] = round(time.perf_counter() - t0, 3)
        _commit(tmp, dest, fields)
    return fields


def _check_count(what: str, n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise MnemoniaError(f"OnnxEmbedder {what}={n!r}: must be an integer >= 1")


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (bundled) through ONNX Runtime: the sentence-transformers vectors to
    float precision (``quantized=True``: int8 weights, close but not equal vectors).

    The first use exports the model into ``cache_dir`` (default :func:`default_cache_dir`) once
    per machine (a few seconds, torch needed then) and reuses the file afterwards. Its ``name``
    is the model's, as for :class:`~mnemonia.embeddings.SentenceTransformerEmbedder`, so a
    store built with either opens with the other.

    A query runs on the calling thread with ``threads`` intra-op threads (default
    :func:`default_threads`: the process's CPUs, at most two; the pool never spins).
    :meth:`embed_documents` sorts the texts by token count and runs ``batch_workers`` batches
    of at most ``batch_size`` at once, each on its own thread (default
    :func:`default_batch_workers`: the process's CPUs over ``threads``, at most two; one
    with the default threads on two CPUs).

    Example:
        >>> emb = OnnxEmbedder()  # doctest: +SKIP
        >>> emb.embed_query("hello").shape  # doctest: +SKIP
        (384,)
    """

    def __init__(self, *, quantized: bool = False,
                 cache_dir: str | os.PathLike[str] | None = None,
                 model_path: str | os.PathLike[str] | None = None,
                 name: str = DEFAULT_MODEL_NAME, batch_size: int = DEFAULT_BATCH_SIZE,
                 threads: int | None = None, batch_workers: int | None = None) -> None:
        if threads is None:
            threads = default_threads()
        for what, n in (("batch_size", batch_size), ("threads", threads)):
            _check_count(what, n)
        if batch_workers is None:
            batch_workers = default_batch_workers(threads)
        _check_count("batch_workers", batch_workers)
        self.name = name
        self.quantized = bool(quantized)
        self._model_dir = Path(model_path) if model_path is not None else None
        self._cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self._batch_size = batch_size
        self._threads = threads
        self.batch_workers = batch_workers
        """Batches of one :meth:`embed_documents` call embedded at once (a query is one)."""
        self._state: tuple[Any, _Tokens, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self.path: Path | None = None
        """The cached model file, once loaded."""
        self.exported: list[str] = []
        """The files this instance exported (``"float32"``, ``"int8"``); empty on a cache hit."""
        self.export_seconds = 0.0

    def _load(self) -> tuple[Any, _Tokens, dict[str, Any]]:
        if self._state is None:
            with self._lock:
                if self._state is None:
                    self._state = self._open()
        return self._state

    def _open(self) -> tuple[Any, _Tokens, dict[str, Any]]:
        quiet_offline_environment()
        model_dir = self._model_dir if self._model_dir is not None else bundled_model_path()
        folder = (self._cache_dir or default_cache_dir()) / model_key(model_dir)
        path = folder / ("model-int8.onnx" if self.quantized else "model.onnx")
        cached = _read_verified(path)
        if cached is None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                cached = self._export(model_dir, folder, path)
            except OSError as e:
                raise StoreError(
                    f"cannot write the ONNX model cache {str(folder)!r}: {e.strerror or e}; "
                    "set onnx_cache_dir (MNEMONIA_ONNX_CACHE_DIR) to a writable folder") from e
        try:
            session = _make_session(cached.blob, self._threads)
        except Exception as e:  # onnxruntime raises its own exception types
            raise MnemoniaError(f"ONNX Runtime cannot load {str(path)!r}: {e}") from e
        manifest = cached.manifest
        self.path = path
        return session, _Tokens(model_dir, manifest["max_seq_length"], manifest["pad_id"]), \
            manifest

    def _export(self, model_dir: Path, folder: Path, path: Path) -> _Cached:
        """Export (and quantize) under the folder's lock, unless another process just did."""
        with _folder_lock(folder):
            cached = _read_verified(path)
            if cached is not None:
                return cached
            float_path = folder / "model.onnx"
            source = _read_verified(float_path)
            if source is None:
                self._note(_export_float(model_dir, float_path))
                source = _read_verified(float_path)
            if self.quantized and source is not None:
                self._note(_quantize(model_dir, source, path))
            cached = _read_verified(path)
        if cached is None:
            raise MnemoniaError(f"the exported {str(path)!r} does not match its manifest")
        return cached

    def _note(self, fields: dict[str, Any]) -> None:
        self.exported.append(str(fields["variant"]))
        self.export_seconds += float(fields["export_seconds"])

    @property
    def dimension(self) -> int:
        return int(self._load()[2]["dimension"])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` (rows in input order), batched by token count."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        session, tokens, _ = self._load()
        return _run(session, tokens, texts, self._batch_size, self.batch_workers)

    def embed_query(self, text: str) -> np.ndarray:
        session, tokens, _ = self._load()
        first: np.ndarray = _run(session, tokens, [text], 1)[0]
        return first

    def __repr__(self) -> str:
        variant = "int8" if self.quantized else "float32"
        return f"OnnxEmbedder(name={self.name!r}, {variant})"
