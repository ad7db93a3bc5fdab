"""LangGraph's ``index=`` (``IndexConfig``) for ``MnemoniaStore``: checked in one place, then
mapped onto the engine (``fields`` -> what is embedded, ``dims`` -> the engine's model size,
``embed`` -> the model of a store the adapter opens itself)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemonia import MemoryEngine
from mnemonia.embeddings import CallableEmbedder
from mnemonia.errors import InvalidInputError, shown

__all__ = ["INDEX_KEYS", "IndexSpec", "check_engine", "dims_problems", "embedder_for",
           "parse_index"]

INDEX_KEYS = ("dims", "embed", "fields")


@dataclass(frozen=True, kw_only=True)
class IndexSpec:
    """A checked index config: ``None`` where the caller gave nothing."""

    dims: int | None = None
    embed: Any = None
    fields: list[str] | None = None


def _paths_ok(fields: Any) -> bool:
    return isinstance(fields, Sequence) and not isinstance(fields, str) and all(
        isinstance(f, str) and f for f in fields)


def parse_index(index: Any, index_fields: Any) -> IndexSpec:
    """Check ``index`` (a LangGraph ``IndexConfig`` or ``None``) and ``index_fields`` together;
    every violation is reported in one :class:`InvalidInputError`."""
    problems: list[str] = []
    if index_fields is not None and not _paths_ok(index_fields):
        problems.append(f"index_fields={shown(index_fields)}: must be a list of non-empty path "
                        "strings such as ['text'] or ['$']")
    if index is None:
        if problems:
            raise InvalidInputError("; ".join(problems))
        return IndexSpec(fields=list(index_fields) if index_fields is not None else None)
    if not isinstance(index, Mapping):
        raise InvalidInputError(f"index={shown(index)}: must be a LangGraph IndexConfig dict "
                                f"(keys {', '.join(INDEX_KEYS)}) or None")
    unknown = sorted(str(k) for k in index if k not in INDEX_KEYS)
    if unknown:
        problems.append(f"index has unknown key(s) {unknown}; IndexConfig keys are "
                        f"{', '.join(INDEX_KEYS)}")
    dims = index.get("dims")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0):
        problems.append(f"index dims={shown(dims)}: must be a positive int (the size of the "
                        "embedding vectors)")
    fields = index.get("fields")
    if fields is not None and not _paths_ok(fields):
        problems.append(f"index fields={shown(fields)}: must be a list of non-empty path strings "
                        "such as ['text'], ['memory', 'context[*].content'] or ['$']")
    embed = index.get("embed")
    if embed is not None:
        if not (isinstance(embed, str) or callable(embed) or (
                hasattr(embed, "embed_documents") and hasattr(embed, "embed_query"))):
            problems.append(f"index embed={shown(embed)}: must be a LangChain Embeddings, a "
                            "function texts -> vectors, or a provider string")
        elif inspect.iscoroutinefunction(embed):
            problems.append(f"index embed={shown(embed)} is an async function: Mnemonia embeds "
                            "on its own (synchronous) write and recall paths, so it needs a "
                            "synchronous function or a LangChain Embeddings")
    if fields is not None and index_fields is not None and _paths_ok(index_fields) \
            and list(fields) != list(index_fields):
        problems.append(f"index_fields={shown(index_fields)} and index fields={shown(fields)} "
                        "disagree: give the fields once")
    if problems:
        raise InvalidInputError("; ".join(problems))
    chosen = fields if fields is not None else index_fields
    return IndexSpec(dims=dims, embed=embed,
                     fields=list(chosen) if chosen is not None else None)


def embedder_for(embed: Any) -> CallableEmbedder:
    """A Mnemonia embedder running a LangGraph ``embed`` (through LangGraph's own
    ``ensure_embeddings``, so a function or a provider string means what it means there)."""
    from langgraph.store.base.embed import ensure_embeddings

    if isinstance(embed, str):
        name = embed
    elif hasattr(embed, "embed_documents"):
        name = None  # CallableEmbedder names a LangChain Embeddings by its model
    else:
        name = f"langgraph:{getattr(embed, '__module__', '?')}." \
               f"{getattr(embed, '__qualname__', type(embed).__name__)}"
    return CallableEmbedder(ensure_embeddings(embed), name=name)


def _runs(engine: MemoryEngine, embed: Any, wanted: Any) -> bool:
    """Whether ``engine`` embeds with ``embed`` (the object itself, what wraps it, or the
    embedder ``wanted`` that was made of it)."""
    emb = engine.embedder
    model = getattr(emb, "model", None)
    if emb is wanted or embed is emb or embed is model:
        return True
    inner = getattr(model, "func", None)  # LangGraph's EmbeddingsLambda around a function
    return inner is not None and inner is embed


def dims_problems(embedder: Any, dims: int | None) -> list[str]:
    """What is wrong with ``dims`` for ``embedder`` (nothing when it matches or is absent)."""
    if dims is None:
        return []
    have = int(embedder.dimension)
    if dims == have:
        return []
    return [f"index dims={dims} does not match the embedding model {embedder.name!r}, which "
            f"makes {have}-dimension vectors: pass dims={have} (or leave it out), or use a "
            f"model of {dims} dimensions (MemoryEngine.open(path, embedder=<your embeddings>))"]


def check_engine(engine: MemoryEngine, spec: IndexSpec, *, wanted: Any = None) -> None:
    """Refuse an ``embed`` that ``engine`` does not run and ``dims`` other than its model's.

    ``wanted``: the embedder this adapter made of ``spec.embed`` and opened the process's
    shared store with (``None`` when the caller passed the engine)."""
    problems: list[str] = []
    emb = engine.embedder
    if spec.embed is not None and not _runs(engine, spec.embed, wanted):
        if wanted is not None:
            problems.append(
                f"index embed={shown(spec.embed)} cannot be used: this process's shared store "
                f"{str(engine.path)!r} is already open with the model {emb.name!r}, and a store "
                "embeds with one model only. Pass engine=MemoryEngine.open(<another folder>, "
                "embedder=<your embeddings>) instead")
        else:
            problems.append(
                f"index embed={shown(spec.embed)} cannot be used: MnemoniaStore embeds with its "
                f"engine's model {emb.name!r}, fixed when the engine was opened (every vector "
                "of a store comes from one model). Open the engine with yours, "
                "MemoryEngine.open(path, embedder=<your embeddings>), or leave 'embed' out")
    problems += dims_problems(emb, spec.dims)
    if problems:
        raise InvalidInputError("; ".join(problems))
