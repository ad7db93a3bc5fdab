"""``MnemoniaStore``: a LangGraph long-term memory ``BaseStore`` on the Mnemonia engine.

Needs the ``[langgraph]`` extra: ``pip install "langchain-mnemonia[langgraph]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from mnemonia import Memory, MemoryEngine, validation
from mnemonia.errors import InvalidInputError, MemoryNotFoundError
from mnemonia.models import KINDS

from langchain_mnemonia._private.engine import default_engine
from langchain_mnemonia._private.extras import missing_extra
from langchain_mnemonia._private.filters import matches
from langchain_mnemonia._private.namespaces import item_id, namespace_matches, namespace_tenant

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
    )
except ImportError as e:  # pragma: no cover - exercised by a test that hides the package
    raise missing_extra("langgraph", e) from e

__all__ = ["MnemoniaStore"]

_META = "langgraph"  # the metadata key holding namespace, key, value, created_at, indexed
_TEXT_FIELDS = ("text", "content", "memory")
_WIDEN = 4


def _validate_labels(namespace: Sequence[Any]) -> None:
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(namespace)}: labels must be "
                "non-empty strings without '.' or NUL")


class MnemoniaStore(BaseStore):
    """LangGraph ``BaseStore`` where each namespace is a Mnemonia tenant and each item a memory.

    - A namespace tuple maps to its own tenant (deterministic name, a digest of the labels), so
      namespaces never see each other: a search only reads the tenants whose namespace starts
      with the requested prefix, and recall never crosses tenants.
    - A key maps to a stable memory id; the value is kept with the memory (JSON) and the text
      that is embedded comes from the value: the paths in ``index=[...]`` (or the store's
      ``index_fields``), else its ``text`` / ``content`` / ``memory`` field, else the whole
      value as JSON. ``index=False`` keeps an item out of ranked search (it can still fill a
      page, with ``score=None``, as in ``InMemoryStore``). Several indexed fields are joined
      into one text, not pooled as separate vectors.
    - ``put`` on an existing key replaces the memory (same id, ``created_at`` kept); ``put``
      with ``None`` (``delete``) forgets it for good.
    - ``search(namespace_prefix, query=...)`` runs the recall pipeline (hybrid similarity,
      spreading activation, retention and utility) and returns items best first with the recall
      score; ``filter`` applies to value fields (``$eq $ne $gt $gte $lt $lte $in $nin``).
      Without a query, items come most recently updated first.

    In one batch, reads see the state before the batch's writes; of several puts to one key the
    last wins (as in LangGraph's own stores). TTL is not supported.

    Example:
        >>> import tempfile
        >>> from mnemonia import MemoryEngine
        >>> from mnemonia.embeddings import HashingEmbedder
        >>> from langchain_mnemonia import MnemoniaStore
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder())
        >>> store = MnemoniaStore(engine=engine)
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
    """

    supports_ttl: bool = False

    def __init__(
        self,
        engine: MemoryEngine | None = None,
        *,
        index_fields: Sequence[str] | None = None,
        tenant_prefix: str = "lg",
        kind: str = "fact",
        importance: float = 0.5,
        mode: str | None = None,
        touch: bool = True,
    ) -> None:
        """Wrap an engine as a LangGraph store.

        Args:
            engine: The memory engine; ``None`` opens the embedded default (``./memory``).
            index_fields: Value paths to embed when ``put`` gets no ``index`` (LangGraph path
                syntax, e.g. ``["memory", "context[*].content"]``); default: the ``text`` /
                ``content`` / ``memory`` field, else the whole value as JSON.
            tenant_prefix: Leads every tenant name this store creates (letters/digits/'-').
            kind: Memory kind of stored items (``fact`` by default).
            importance: Importance of stored items in [0, 1].
            mode: Recall mode of ``search``; ``None``: the engine's default.
            touch: Whether ``search`` records the access (strengthens what it finds).
        """
        if (not isinstance(tenant_prefix, str) or not tenant_prefix
                or not tenant_prefix[0].isalnum() or len(tenant_prefix) > 20
                or not all(c.isalnum() or c in "-_" for c in tenant_prefix)):
            raise InvalidInputError(
                f"tenant_prefix={tenant_prefix!r}: must be 1-20 letters, digits, '-' or '_', "
                "starting with a letter or digit")
        if index_fields is not None and (isinstance(index_fields, str) or not all(
                isinstance(f, str) and f for f in index_fields)):
            raise InvalidInputError(
                f"index_fields={index_fields!r}: must be a list of non-empty path strings")
        if kind not in KINDS:
            raise InvalidInputError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")
        validation.finite_unit(importance, "importance")
        self.engine = engine if engine is not None else default_engine()
        self.index_fields = list(index_fields) if index_fields is not None else None
        self.tenant_prefix = tenant_prefix
        self.kind = kind
        self.importance = importance
        self.mode = mode
        self.touch = touch
        self._namespaces: dict[str, tuple[str, ...]] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MnemoniaStore({self.engine!r}, tenant_prefix={self.tenant_prefix!r})"

    # ------------------------------------------------------------------------- mapping
    def tenant_for(self, namespace: tuple[str, ...]) -> str:
        """The tenant that holds ``namespace``."""
        return namespace_tenant(namespace, self.tenant_prefix)

    def _known_namespaces(self) -> dict[str, tuple[str, ...]]:
        """Every namespace this store has written, by tenant (looked up once per tenant)."""
        lead = f"{self.tenant_prefix}-"
        for tenant in self.engine.tenants():
            if tenant in self._namespaces or not tenant.startswith(lead):
                continue
            first = self.engine.list(tenant=tenant, include_deleted=True, limit=1)
            if not first or _META not in first[0].metadata:
                continue
            ns = tuple(first[0].metadata[_META]["namespace"])
            if self.tenant_for(ns) == tenant:
                self._namespaces[tenant] = ns
        return dict(self._namespaces)

    def _tenants_under(self, prefix: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        n = len(prefix)
        return sorted(((t, ns) for t, ns in self._known_namespaces().items()
                       if ns[:n] == prefix), key=lambda p: p[1])

    def _read(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        tenant = self.tenant_for(namespace)
        try:
            mem = self.engine.get(item_id(namespace, key), tenant=tenant)
        except MemoryNotFoundError:
            return None
        return None if mem.deleted else mem

    @staticmethod
    def _fields(mem: Memory) -> dict[str, Any]:
        meta = mem.metadata[_META]
        return dict(namespace=tuple(meta["namespace"]), key=meta["key"], value=meta["value"],
                    created_at=datetime.fromisoformat(meta["created_at"]),
                    updated_at=mem.created_at)

    def _item(self, mem: Memory) -> Item:
        return Item(**self._fields(mem))

    def _search_item(self, mem: Memory, score: float | None) -> SearchItem:
        return SearchItem(**self._fields(mem), score=score)

    def _stored_items(self, tenant: str) -> list[Memory]:
        return [m for m in self.engine.list(tenant=tenant) if _META in m.metadata]

    @staticmethod
    def _value(mem: Memory) -> dict[str, Any]:
        return mem.metadata[_META]["value"]  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------- texts
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
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    # ------------------------------------------------------------------------- batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get / search / list_namespaces / put ops; reads see the state before the puts."""
        ops = list(ops)
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
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            for op in ops:
                if isinstance(op, GetOp):
                    mem = self._read(tuple(op.namespace), str(op.key))
                    results.append(self._item(mem) if mem is not None else None)
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                else:
                    puts[(tuple(op.namespace), str(op.key))] = op
                    results.append(None)
            if puts:
                self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    # ------------------------------------------------------------------------- writes
    def _check_value(self, op: PutOp) -> None:
        """Every value of a batch is checked before anything is written: JSON-safe and within
        the engine's metadata limits as it will be kept (two levels deep in the memory's
        metadata), by the core's own check."""
        cfg = self.engine.config
        meta = {_META: {"namespace": list(op.namespace), "key": str(op.key),
                        "value": dict(op.value or {}), "indexed": True,
                        "created_at": self.engine.clock.now().isoformat()}}
        try:
            validation.json_safe(meta, max_bytes=cfg.max_metadata_bytes,
                                 max_depth=cfg.max_metadata_depth)
        except InvalidInputError as e:
            raise InvalidInputError(f"value of key {str(op.key)!r}: {e}") from e

    def _apply_puts(self, puts: list[PutOp]) -> None:
        by_ns: dict[tuple[str, ...], list[PutOp]] = {}
        for op in puts:
            if op.ttl is not None:
                raise NotImplementedError(
                    "MnemoniaStore does not support TTL; memories fade by retention instead "
                    "(put with ttl=None)")
            if op.value is not None and not isinstance(op.value, dict):
                raise InvalidInputError(f"value={op.value!r}: a store value must be a dict")
            if op.value is not None:
                self._check_value(op)
            by_ns.setdefault(tuple(op.namespace), []).append(op)
        now = self.engine.clock.now()
        max_chars = self.engine.config.max_text_chars
        for namespace, ops in by_ns.items():
            tenant = self.tenant_for(namespace)
            items: list[dict[str, Any]] = []
            for op in ops:
                key = str(op.key)
                mid = item_id(namespace, key)
                old = self._read(namespace, key)
                if op.value is None:
                    with contextlib.suppress(MemoryNotFoundError):
                        self.engine.forget(mid, tenant=tenant, hard=True)
                    continue
                value = dict(op.value)
                text = self._index_text(value, op.index)
                created = (old.metadata[_META]["created_at"] if old is not None
                           else now.isoformat())
                if text is None:
                    stored = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
                else:
                    stored = text
                items.append({
                    "id": mid, "text": stored[:max_chars] if stored.strip() else key,
                    "kind": self.kind, "importance": self.importance,
                    "metadata": {_META: {"namespace": list(namespace), "key": key,
                                         "value": value, "created_at": created,
                                         "indexed": text is not None}},
                })
            if not items:
                continue
            # Existing keys are replaced in place: the new version is embedded and written
            # before the old one goes, so a failure never loses the stored item.
            self.engine.add_many(items, tenant=tenant, replace=True)
            self._namespaces[tenant] = namespace

    # ------------------------------------------------------------------------- reads
    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        limit, offset = max(0, op.limit), max(0, op.offset)
        need = offset + limit
        query = (op.query or "").strip()[: self.engine.config.max_text_chars]
        tenants = self._tenants_under(prefix)
        if not query:
            mems = [m for t, _ in tenants for m in self._stored_items(t)
                    if matches(self._value(m), op.filter)]
            mems.sort(key=lambda m: (-m.created_at.timestamp(), m.metadata[_META]["key"]))
            return [self._search_item(m, None) for m in mems[offset:need]]
        ranked: list[tuple[float, Memory]] = []
        unranked: list[Memory] = []
        for tenant, _ in tenants:
            hits, rest = self._recall(tenant, query, need, op.filter)
            ranked += hits
            unranked += rest
        ranked.sort(key=lambda p: -p[0])
        out = [self._search_item(m, s) for s, m in ranked[offset:need]]
        if len(out) < limit:
            skip = max(0, offset - len(ranked))
            out += [self._search_item(m, None) for m in unranked[skip: skip + limit - len(out)]]
        return out

    def _recall(self, tenant: str, query: str, need: int, flt: dict[str, Any] | None
                ) -> tuple[list[tuple[float, Memory]], list[Memory]]:
        """Recall in one tenant until ``need`` matching indexed items (or all) are found.

        The first recall records the access of its hits (if ``touch``); widening passes, needed
        only when the filter drops hits, do not record again.
        """
        everything = self.engine.list(tenant=tenant)
        stored = [m for m in everything if _META in m.metadata
                  and matches(self._value(m), flt)]
        indexed = {m.id for m in stored if m.metadata[_META].get("indexed", True)}
        unranked = [m for m in stored if m.id not in indexed]
        if need <= 0 or not indexed:
            return [], unranked
        total = len(everything)
        k = min(need, total)
        touch = self.touch
        while True:
            result = self.engine.recall(query, tenant=tenant, k=k, min_activation=0,
                                        mode=self.mode, touch=touch)
            hits = [(h.score, h.memory) for h in result.memories if h.memory.id in indexed]
            if len(hits) >= need or k >= total:
                return hits[:need], unranked
            k, touch = min(total, k * _WIDEN), False

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [ns for t, ns in self._known_namespaces().items()
                      if self.engine.list(tenant=t, limit=1)]
        for cond in op.match_conditions or ():
            if cond.match_type not in ("prefix", "suffix"):
                raise ValueError(f"unsupported namespace match type {cond.match_type!r}")
            namespaces = [ns for ns in namespaces if namespace_matches(
                ns, tuple(cond.path), suffix=cond.match_type == "suffix")]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        namespaces.sort()
        return namespaces[op.offset: op.offset + op.limit]
