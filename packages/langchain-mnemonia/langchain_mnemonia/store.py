"""``MnemoniaStore``: a LangGraph long-term memory ``BaseStore`` on the Mnemonia engine.

Needs the ``[langgraph]`` extra: ``pip install "langchain-mnemonia[langgraph]"``.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mnemonia import MemoryEngine, Scheduler, validation
from mnemonia.embeddings import default_embedder
from mnemonia.errors import InvalidInputError
from mnemonia.models import KINDS, ItemWrite, KeyedItem

from langchain_mnemonia._private.engine import default_engine
from langchain_mnemonia._private.extras import missing_extra

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
    )
except ImportError as e:  # pragma: no cover - exercised by a test that hides the package
    raise missing_extra("langgraph", e) from e

from langchain_mnemonia._private.index import (
    check_engine,
    dims_problems,
    embedder_for,
    parse_index,
)

__all__ = ["MnemoniaStore"]

_TEXT_FIELDS = ("text", "content", "memory")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes")
_EXPIRE_JOB = "expire"


def _validate_labels(namespace: Sequence[Any]) -> None:
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(namespace)}: labels must be "
                "non-empty strings without '.' or NUL")


def _positive_minutes(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"ttl {name}={value!r}: must be None or minutes > 0")
    return float(value)


def _check_ttl_config(ttl: Any) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInputError(f"ttl={ttl!r}: must be a TTLConfig dict or None")
    unknown = sorted(set(ttl) - set(_TTL_KEYS))
    if unknown:
        raise InvalidInputError(f"ttl has unknown key(s) {unknown}; TTLConfig keys are "
                                f"{', '.join(_TTL_KEYS)}")
    for name in ("default_ttl", "sweep_interval_minutes"):
        _positive_minutes(ttl.get(name), name)
    for name in ("refresh_on_read", "omit_expired"):
        if name in ttl:
            validation.boolean(ttl[name], f"ttl {name}")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


class MnemoniaStore(BaseStore):
    """Mnemonia long-term memory as a LangGraph store: each namespace is a tenant, each item a
    memory, and ``search(query=...)`` runs Mnemonia's recall.

    Setup:
        Install ``langchain-mnemonia`` with the ``langgraph`` extra. The embedded store
        (Chroma + SQLite + the bundled all-MiniLM-L6-v2 model) runs offline.

        .. code-block:: bash

            pip install -U "langchain-mnemonia[langgraph]"

    Key init args:
        engine: MemoryEngine | None
            The memory engine; ``None`` opens the embedded default (``./memory``).
        index: IndexConfig | None
            LangGraph's index config, as ``InMemoryStore`` and ``PostgresStore`` take it:
            ``fields`` are the value paths to embed (as ``index_fields``; ``["$"]`` embeds the
            whole value as JSON); ``dims`` must equal the engine's model dimension (384 for
            the bundled all-MiniLM-L6-v2); ``embed`` (an ``Embeddings``, a function texts ->
            vectors, or a provider string) is used when the store opens its own engine
            (``engine=None``) and otherwise must be the model the engine already runs: a
            store's vectors all come from one model. Without ``index``, search still works
            (the engine always embeds).
        index_fields: list[str] | None
            Value paths to embed when ``put`` gets no ``index`` (LangGraph path syntax, e.g.
            ``["memory", "context[*].content"]``); default: the ``text`` / ``content`` /
            ``memory`` field, else the whole value as JSON.
        ttl: TTLConfig | None
            ``default_ttl`` (minutes), ``refresh_on_read`` (default True) and
            ``sweep_interval_minutes`` (for :meth:`start_ttl_sweeper`).
        tenant_prefix: str
            Leads every tenant name of this store (one prefix per store sharing an engine).
        kind, importance, mode, touch:
            The memories' kind and importance; the recall mode of ``search``; whether a
            search records the access (strengthens what it finds).

    Instantiate:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from langchain_mnemonia import MnemoniaStore
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> store = MnemoniaStore(engine=engine, ttl={"default_ttl": 60 * 24 * 30})

    Usage:
        >>> store.put(("users", "alice"), "drink", {"text": "Alice drinks green tea", "n": 1})
        >>> store.put(("users", "alice"), "trip", {"text": "Alice flies to Lisbon", "n": 2})
        >>> store.put(("users", "bob"), "drink", {"text": "Bob drinks black coffee", "n": 3})
        >>> store.get(("users", "alice"), "drink").value["text"]
        'Alice drinks green tea'
        >>> [i.key for i in store.search(("users", "alice"), query="what tea?", limit=1)]
        ['drink']
        >>> [i.value["n"] for i in store.search(("users",), filter={"n": {"$gte": 2}})]
        [3, 2]
        >>> store.list_namespaces(prefix=("users",))
        [('users', 'alice'), ('users', 'bob')]
        >>> store.delete(("users", "alice"), "trip")
        >>> store.get(("users", "alice"), "trip") is None
        True
        >>> engine.close()

    Use in a graph:
        .. code-block:: python

            graph = builder.compile(store=store)  # nodes take `store: BaseStore`

    How it maps:

    - A namespace is its own tenant (a digest of the labels names it), so namespaces never see
      each other and recall never crosses them. A key is a memory; ``put`` on an existing key
      replaces it in place (``created_at`` kept), ``delete`` forgets it for good.
    - ``get``, ``search`` without a query, value filters (``$eq $ne $gt $gte $lt $lte $in
      $nin``, dotted paths into nested values) and ``list_namespaces`` run as SQL on indexes
      of the side-store with a ``LIMIT`` (:attr:`mnemonia.MemoryEngine.items`), so their cost
      follows the page, not the namespace's size. Without a query, items come most recently
      updated first.
    - ``search(query=...)`` ranks by recall (hybrid similarity, spreading activation,
      retention, utility) with the filter pushed into the recall's reads. ``index=False``
      keeps an item out of ranked search (it can still fill a page, with ``score=None``, as in
      ``InMemoryStore``); several indexed fields are joined into one text.
    - TTL: an item expires ``ttl`` minutes after its last write (or read, with
      ``refresh_ttl``). Expired items are left out of every read at once (``omit_expired`` is
      always on) and removed for good by the engine's ``expire`` maintenance job (every
      ``config.expire_interval`` seconds with background maintenance), by
      :meth:`sweep_ttl`, or by :meth:`start_ttl_sweeper`.
    - In one batch, reads see the state before the batch's writes; of several puts to one key
      the last wins (as in LangGraph's own stores).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        engine: MemoryEngine | None = None,
        *,
        index: IndexConfig | None = None,
        index_fields: Sequence[str] | None = None,
        ttl: TTLConfig | None = None,
        tenant_prefix: str = "lg",
        kind: str = "fact",
        importance: float = 0.5,
        mode: str | None = None,
        touch: bool = True,
    ) -> None:
        """Wrap an engine as a LangGraph store (see the class for the arguments)."""
        tenant_prefix = validation.item_space(tenant_prefix)
        spec = parse_index(index, index_fields)
        if kind not in KINDS:
            raise InvalidInputError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")
        validation.finite_unit(importance, "importance")
        self.ttl_config = _check_ttl_config(ttl)
        if engine is None:
            wanted = embedder_for(spec.embed) if spec.embed is not None else None
            problems = dims_problems(wanted or default_embedder(), spec.dims)
            if problems:  # before the store folder is created
                raise InvalidInputError("; ".join(problems))
            engine = default_engine(embedder=wanted)
            check_engine(engine, spec, wanted=wanted)
        else:
            check_engine(engine, spec)
        self.engine = engine
        self.index_config: IndexConfig | None = dict(index) if index else None  # type: ignore[assignment]
        self.index_fields = spec.fields
        self.tenant_prefix = tenant_prefix
        self.kind = kind
        self.importance = importance
        self.mode = mode
        self.touch = validation.boolean(touch, "touch")
        self._sweeper: Scheduler | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MnemoniaStore({self.engine!r}, tenant_prefix={self.tenant_prefix!r})"

    def tenant_for(self, namespace: tuple[str, ...]) -> str:
        """The tenant that holds ``namespace``."""
        return self.engine.items.tenant(namespace, space=self.tenant_prefix)

    # ------------------------------------------------------------------------- conversions
    @staticmethod
    def _item(found: KeyedItem) -> Item:
        return Item(namespace=found.namespace, key=found.key, value=found.value,
                    created_at=found.created_at, updated_at=found.updated_at)

    @staticmethod
    def _search_item(found: KeyedItem) -> SearchItem:
        return SearchItem(namespace=found.namespace, key=found.key, value=found.value,
                          created_at=found.created_at, updated_at=found.updated_at,
                          score=found.score)

    def _index_text(self, value: dict[str, Any], index: Any) -> str | None:
        """The text to embed, or ``None`` when the item is not indexed."""
        if index is False:
            return None
        paths = list(index) if index is not None else self.index_fields
        if paths:
            texts = [t for p in paths for t in get_text_at_path(value, p) if t.strip()]
            return "\n".join(texts) if texts else None
        for name in _TEXT_FIELDS:
            field = value.get(name)
            if isinstance(field, str) and field.strip():
                return field
        try:
            return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        except (RecursionError, ValueError):
            return None  # not JSON: the engine's check of the value says why, writing nothing

    def _write(self, op: PutOp) -> ItemWrite:
        value = op.value
        if value is not None and not isinstance(value, dict):
            raise InvalidInputError(f"value={value!r}: a store value must be a dict")
        text = None if value is None else self._index_text(value, op.index)
        return ItemWrite(namespace=tuple(op.namespace), key=str(op.key), value=value,
                         text=text, ttl=op.ttl if value is not None else None)

    # ------------------------------------------------------------------------- batch
    @staticmethod
    def _validate(ops: list[Op]) -> None:
        for op in ops:
            if isinstance(op, GetOp | PutOp):
                _validate_labels(op.namespace)
                if isinstance(op, PutOp) and not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
            elif isinstance(op, SearchOp):
                _validate_labels(op.namespace_prefix)
            elif isinstance(op, ListNamespacesOp):
                for cond in op.match_conditions or ():
                    _validate_labels([p for p in cond.path if p != "*"])
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}: {op!r}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get / search / list_namespaces / put ops; reads see the state before the puts."""
        ops = list(ops)
        self._validate(ops)
        writes = [self._write(op) for op in ops if isinstance(op, PutOp)]  # all checked first
        items = self.engine.items
        space = self.tenant_prefix
        results: list[Result] = []
        with self._lock:
            for op in ops:
                if isinstance(op, GetOp):
                    found = items.get(op.namespace, [str(op.key)], space=space,
                                      refresh_ttl=op.refresh_ttl)
                    got = found.get(str(op.key))
                    results.append(self._item(got) if got is not None else None)
                elif isinstance(op, SearchOp):
                    results.append([self._search_item(f) for f in items.search(
                        op.namespace_prefix, space=space, query=op.query, filter=op.filter,
                        limit=op.limit, offset=op.offset, refresh_ttl=op.refresh_ttl,
                        mode=self.mode, touch=self.touch)])
                elif isinstance(op, ListNamespacesOp):
                    results.append(items.namespaces(
                        space=space, match=[(c.match_type, c.path)
                                            for c in op.match_conditions or ()],
                        max_depth=op.max_depth, limit=op.limit, offset=op.offset))
                else:
                    results.append(None)
            if writes:
                items.put(writes, space=space, kind=self.kind, importance=self.importance)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch` (the engine's blocking reads and writes run off the loop)."""
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    # ------------------------------------------------------------------------- TTL
    def sweep_ttl(self) -> int:
        """Delete every expired item now; returns how many (the engine also sweeps on its
        ``expire`` maintenance cadence)."""
        return self.engine.items.sweep()

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Scheduler:
        """Sweep expired items in a background thread every ``sweep_interval_minutes`` (else
        the TTL config's, else 5), on the engine's clock; returns the running
        :class:`mnemonia.Scheduler` (``stop_ttl_sweeper`` stops it)."""
        cfg = self.ttl_config or {}
        minutes = _positive_minutes(
            sweep_interval_minutes if sweep_interval_minutes is not None
            else cfg.get("sweep_interval_minutes"), "sweep_interval_minutes") or 5.0
        with self._lock:
            if self._sweeper is not None and self._sweeper.running:
                return self._sweeper
            intervals: dict[str, float | None] = dict.fromkeys(Scheduler.jobs)
            intervals[_EXPIRE_JOB] = 60.0 * minutes
            self._sweeper = Scheduler(self.engine, intervals=intervals).start()
            return self._sweeper

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper of :meth:`start_ttl_sweeper`; True once it has stopped."""
        with self._lock:
            sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        sweeper.stop(timeout=timeout)
        return not sweeper.running
