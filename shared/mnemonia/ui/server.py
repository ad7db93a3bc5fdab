"""``mnemonia ui``: open a store and serve the inspector with uvicorn."""

from __future__ import annotations

from typing import Any

from mnemonia.errors import InvalidInputError
from mnemonia.ui.guard import LOOPBACK_HOSTS, is_loopback

__all__ = ["DEFAULT_PORT", "check_binding", "serve"]

DEFAULT_PORT = 8765


def check_binding(host: str, port: Any, token: str | None) -> None:
    """A non-loopback address needs a token; the port must be 0..65535. One error for all."""
    problems = []
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        problems.append(f"port={port!r}: must be 0..65535")
    if not is_loopback(host) and not token:
        problems.append(f"host={host!r} is reachable from other machines: give --token "
                        "(every request then needs it), or keep the default 127.0.0.1")
    if token is not None and len(token) < 16:
        problems.append("--token must be at least 16 characters")
    if problems:
        raise InvalidInputError("; ".join(problems))


def serve(engine: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          token: str | None = None, read_only: bool = False, log_level: str = "info") -> None:
    """Serve the inspector over an open ``MemoryEngine`` until interrupted (``mnemonia ui``
    opens the store with manual maintenance: the inspector only looks, and acts when asked).
    """
    import uvicorn

    from mnemonia.ui.app import create_app

    check_binding(host, port, token)
    hosts = LOOPBACK_HOSTS if is_loopback(host) else None
    app = create_app(engine, read_only=read_only, token=token, hosts=hosts)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"mnemonia ui: serving {engine!r} at {address}"
          + (" (read-only)" if read_only else ""), flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
