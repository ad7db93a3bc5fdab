"""Moving memories in and out of a store: JSONL export (:mod:`.export`) and import
(:mod:`.imports`) of the records :mod:`.format` declares. Keeping the two halves of a store in
agreement (open, repair, doctor) is :mod:`mnemonia.consistency`."""

from __future__ import annotations

from mnemonia.transfer.export import export
from mnemonia.transfer.format import BATCH, FORMAT, MEMORY_FIELDS, Progress
from mnemonia.transfer.imports import CONFLICT_MODES, import_file, repair_imports

__all__ = ["BATCH", "CONFLICT_MODES", "FORMAT", "MEMORY_FIELDS", "Progress", "export",
           "import_file", "repair_imports"]
