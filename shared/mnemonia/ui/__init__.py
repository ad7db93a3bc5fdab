"""The memory inspector: a local web app that shows what a store holds, why it recalls and what
it will forget (``mnemonia ui --path ./memory``).

Starlette + Jinja2 templates, served by uvicorn; plots drawn server-side with matplotlib (SVG);
no front-end build step and nothing fetched at run time. Install with
``pip install 'mnemonia[ui]'``.

Example:
    >>> import tempfile
    >>> from starlette.testclient import TestClient
    >>> from mnemonia import MemoryEngine
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> from mnemonia.ui import create_app
    >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder(),
    ...                        maintenance="manual") as engine:
    ...     _ = engine.add("Alice prefers tea", tenant="alice")
    ...     client = TestClient(create_app(engine), base_url="http://127.0.0.1")
    ...     client.get("/api/tenants").json()["tenants"][0]["tenant"]
    'alice'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemonia.errors import MissingDependencyError

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["INSTALL_HINT", "create_app", "require", "serve"]

INSTALL_HINT = "pip install 'mnemonia[ui]'"


def require() -> None:
    """Raise MissingDependencyError (with the pip line) unless the ui extra is installed."""
    try:
        import jinja2  # noqa: F401
        import matplotlib  # noqa: F401
        import python_multipart  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(
            f"the memory inspector needs {e.name or 'its dependencies'}: {INSTALL_HINT}") from e


def create_app(engine: Any, **options: Any) -> Starlette:
    """The inspector's ASGI app over an open ``MemoryEngine`` (see
    :func:`mnemonia.ui.app.create_app` for the options)."""
    require()
    from mnemonia.ui.app import create_app as make

    return make(engine, **options)


def serve(engine: Any, **options: Any) -> None:
    """Serve the inspector over ``engine`` with uvicorn (see :func:`mnemonia.ui.server.serve`)."""
    require()
    from mnemonia.ui.server import serve as run

    run(engine, **options)
