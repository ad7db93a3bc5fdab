"""Install hints for the optional extras."""

from __future__ import annotations

from mnemonia.errors import MissingDependencyError

__all__ = ["missing_extra"]

_EXTRAS = {
    "legacy": ("langchain-classic", "MnemoniaMemory"),
    "langgraph": ("langgraph", "MnemoniaStore"),
}


def install_line(extra: str) -> str:
    """The exact pip command that installs ``extra``."""
    return f'pip install "langchain-mnemonia[{extra}]"'


def missing_extra(extra: str, error: ImportError) -> MissingDependencyError:
    """The error to raise (``from error``) when an optional dependency is not installed."""
    package, cls = _EXTRAS[extra]
    return MissingDependencyError(
        f"{cls} needs the optional dependency {package!r} ({error.name or error}); "
        f"install it with: {install_line(extra)}"
    )
