"""LangGraph namespaces and keys as Mnemonia tenants and memory ids.

Both maps are deterministic and collision-resistant (a SHA-256 digest of the exact labels), so
two namespaces never share a tenant and two keys never share an id, whatever characters the
labels hold. A readable slug of the labels leads the tenant name to help debugging.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

__all__ = ["item_id", "namespace_matches", "namespace_tenant"]

_NOT_SLUG = re.compile(r"[^A-Za-z0-9]+")
_DIGEST = 16


def _digest(obj: object, n: int) -> str:
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:n]


def namespace_tenant(namespace: Sequence[str], prefix: str) -> str:
    """``<prefix>-<slug>-<digest>``: a valid tenant name (1-64 chars, alnum at both ends)."""
    slug = _NOT_SLUG.sub("-", "-".join(namespace)).strip("-")
    head = f"{prefix}-{slug}" if slug else prefix
    head = head[: 64 - _DIGEST - 1].rstrip("-_")
    return f"{head}-{_digest(list(namespace), _DIGEST)}"


def item_id(namespace: Sequence[str], key: str) -> str:
    """The memory id of ``key`` in ``namespace`` (ids are unique across the whole engine)."""
    return f"lg-{_digest([list(namespace), key], 40)}"


def namespace_matches(namespace: tuple[str, ...], path: Sequence[str], *, suffix: bool) -> bool:
    """Prefix (or suffix) match where ``"*"`` in ``path`` matches any one label."""
    if len(namespace) < len(path):
        return False
    pairs = (zip(reversed(namespace), reversed(path), strict=False) if suffix
             else zip(namespace, path, strict=False))
    return all(p == "*" or n == p for n, p in pairs)
