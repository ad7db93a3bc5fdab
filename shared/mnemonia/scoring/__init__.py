"""The pure scoring core of Mnemonia: standard library only, no I/O, time passed in.

One module per model: :mod:`~mnemonia.scoring.sm2` (spaced repetition),
:mod:`~mnemonia.scoring.retention` (Ebbinghaus forgetting), :mod:`~mnemonia.scoring.priority`
(priority and eviction), :mod:`~mnemonia.scoring.consolidation` (near-duplicate grouping),
:mod:`~mnemonia.scoring.activation` (hybrid seeds and spreading activation),
:mod:`~mnemonia.scoring.modes` (recall modes and final score) and
:mod:`~mnemonia.scoring.reevaluation` (gatekeeper and heat-based promotion).

Example:
    >>> from mnemonia.scoring import sm2
    >>> sm2.SM2State().easiness
    2.5
"""

from __future__ import annotations

from mnemonia.scoring import (
    activation,
    consolidation,
    modes,
    priority,
    reevaluation,
    retention,
    sm2,
)

__all__ = [
    "activation",
    "consolidation",
    "modes",
    "priority",
    "reevaluation",
    "retention",
    "sm2",
]
