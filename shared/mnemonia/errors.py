"""The error hierarchy of Mnemonia.

Every error a caller can cause is a :class:`MnemoniaError`. Leaves also subclass the builtin
they refine, so ``except ValueError`` keeps working for callers that do not know Mnemonia.
Messages name the bad value and what is allowed. This module is standard library only so the
pure scoring core may raise these errors.
"""

from __future__ import annotations

__all__ = [
    "CrossTenantError",
    "EmbeddingModelMismatchError",
    "FutureTimeError",
    "ImportConflictError",
    "InvalidConfigError",
    "InvalidImportFileError",
    "InvalidImportanceError",
    "InvalidInputError",
    "InvalidQualityError",
    "InvalidStrengthError",
    "InvalidTenantError",
    "InvalidTextError",
    "InvalidWeightsError",
    "MemoryDeletedError",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "MnemoniaError",
    "NaiveDatetimeError",
    "StoreError",
    "StoreFileChangedError",
    "StoreInconsistentError",
    "StoreUnavailableError",
    "StoreWriteTakenOverError",
    "UnknownConfigKeyError",
    "UnknownModeError",
    "UnknownRelationTypeError",
    "WriteOutcomeUnknownError",
    "shown",
]


class MnemoniaError(Exception):
    """Root of every error Mnemonia raises on purpose."""


def shown(value: object, limit: int = 200) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters (a 5 MB value
    must not make a 5 MB message; a repr that fails still gives a message)."""
    try:
        text = repr(value)
    except Exception:  # e.g. an int too long to print, or a caller's broken __repr__
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class InvalidConfigError(MnemoniaError, ValueError):
    """A configuration value is out of range; the message lists every violation."""

    def __init__(self, violations: list[str] | str) -> None:
        if isinstance(violations, str):
            violations = [violations]
        self.violations: list[str] = list(violations)
        super().__init__("invalid Mnemonia configuration: " + "; ".join(self.violations))


class UnknownConfigKeyError(InvalidConfigError, TypeError):
    """A keyword argument that is no config key (``MnemoniaConfig(defualt_k=3)``); a
    ``TypeError`` too, like Python's own error for an unexpected keyword argument. The message
    lists every violation of the call, not only the unknown keys."""


class InvalidInputError(MnemoniaError, ValueError):
    """An argument is outside what the API allows."""


class InvalidQualityError(InvalidInputError):
    """An SM-2 quality that is not an int in 0..5."""


class InvalidImportanceError(InvalidInputError):
    """An importance that is not a finite number in [0, 1]."""


class InvalidTextError(InvalidInputError):
    """Memory or query text that is empty, not a string, or too long."""


class InvalidStrengthError(InvalidInputError):
    """A relation strength outside (0, 1]."""


class InvalidTenantError(InvalidInputError):
    """A tenant name that cannot name a collection."""


class InvalidWeightsError(InvalidInputError):
    """Weights that are negative, not finite, or all zero."""


class NaiveDatetimeError(InvalidInputError):
    """A datetime without a timezone."""


class FutureTimeError(InvalidInputError):
    """A timestamp later than the engine clock's now."""


class UnknownModeError(InvalidInputError):
    """A recall mode that is not registered."""


class UnknownRelationTypeError(InvalidInputError):
    """A relation type that is not registered."""


class MemoryNotFoundError(MnemoniaError, KeyError):
    """No memory with that id exists in that tenant."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else "memory not found"


class MemoryDeletedError(InvalidInputError):
    """The memory is soft-deleted (forgotten or evicted): restore it first to use it here."""


class CrossTenantError(InvalidInputError):
    """An operation that would connect or touch two tenants. (An id of another tenant is
    answered like an unknown one, :class:`MemoryNotFoundError`, so nothing says it exists.)"""


class InvalidImportFileError(InvalidInputError):
    """An import file that cannot be loaded as it is: not JSON, cut short, a missing or
    mistyped field, an unknown record, a reference to a memory that is nowhere. ``line`` is
    the 1-based line number (``None`` for the file as a whole). Nothing was written."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(message if line is None else f"line {line}: {message}")


class ImportConflictError(InvalidInputError):
    """Memory ids of an import file already exist in the store (``on_conflict="error"``);
    ``ids`` lists them (the first ones). Nothing was written."""

    def __init__(self, message: str, *, ids: list[str]) -> None:
        self.ids = ids
        super().__init__(message)


class EmbeddingModelMismatchError(MnemoniaError):
    """A collection was opened with another embedding model than the one it was built with."""


class StoreError(MnemoniaError):
    """The storage layer failed."""


class StoreUnavailableError(StoreError, ConnectionError):
    """A storage server did not answer after all retries; nothing was half-written."""


class WriteOutcomeUnknownError(StoreError, ConnectionError):
    """A write whose outcome is unknown: a store stopped answering after the vectors were
    written and before the side-store could say whether the memories are stored. ``ids``
    lists the memories concerned. Retrying ``add`` / ``add_many`` with the same ids and texts
    is idempotent: it finishes the write or writes it again, never a duplicate."""

    def __init__(self, message: str, *, ids: list[str]) -> None:
        self.ids = list(ids)
        super().__init__(message)


class StoreWriteTakenOverError(StoreError):
    """A write of this process was taken over by another process's repair (this process's
    writer lease ran out while the write was under way, e.g. it was stalled or cut off from
    the side-store): the write was undone and nothing of it is stored. Write it again."""


class StoreFileChangedError(StoreError):
    """The SQLite side-store file was deleted or replaced while the engine had it open; the
    write (or read) that noticed it was refused, so nothing was acknowledged and lost."""


class StoreInconsistentError(StoreError):
    """The two halves of a store disagree in a way opening it cannot repair without losing
    something (Chroma holds vectors the side-store does not know): run
    ``mnemonia doctor --repair``."""


class MissingDependencyError(MnemoniaError, ImportError):
    """An optional dependency is missing; the message gives the pip install line."""
