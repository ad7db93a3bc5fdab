"""Recall modes, final score and rerank blend."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mnemonia.errors import InvalidInputError, InvalidWeightsError, UnknownModeError
from mnemonia.scoring import modes

PROPS = settings(max_examples=200, deadline=None)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("agent_memory", (0.35, 0.20, 0.25, 0.20)),
        ("general", (0.40, 0.30, 0.20, 0.10)),
        ("belief", (0.30, 0.45, 0.20, 0.05)),
        ("procedural", (0.40, 0.40, 0.15, 0.05)),
        ("relevance", (1.0, 0.0, 0.0, 0.0)),
    ],
)
def test_builtin_modes(name: str, expected: tuple[float, ...]) -> None:
    w = modes.mode_weights(name)
    assert w is modes.MODES[name]
    assert w.as_tuple() == pytest.approx(expected)
    assert sum(w.as_tuple()) == pytest.approx(1.0)


def test_mode_weights_are_normalised_on_creation() -> None:
    w = modes.ModeWeights(sim=2, conf=2, rec=0, util=0)
    assert w.as_tuple() == (0.5, 0.5, 0.0, 0.0)
    assert w.normalised() == w


def test_unknown_mode_lists_allowed_modes() -> None:
    with pytest.raises(UnknownModeError) as info:
        modes.mode_weights("fastest")
    message = str(info.value)
    assert "'fastest'" in message
    assert all(name in message for name in modes.MODES)
    assert isinstance(info.value, ValueError)


def test_extra_modes() -> None:
    mine = modes.ModeWeights(sim=1, conf=1, rec=1, util=1)
    assert modes.mode_weights("mine", {"mine": mine}) is mine
    with pytest.raises(UnknownModeError, match="mine"):
        modes.mode_weights("other", {"mine": mine})


@pytest.mark.parametrize(
    "fields",
    [
        {"sim": -0.1, "conf": 1, "rec": 0, "util": 0},
        {"sim": 0, "conf": 0, "rec": 0, "util": 0},
        {"sim": float("nan"), "conf": 1, "rec": 0, "util": 0},
        {"sim": True, "conf": 1, "rec": 0, "util": 0},
    ],
)
def test_bad_mode_weights_are_rejected(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidWeightsError):
        modes.ModeWeights(**fields)  # type: ignore[arg-type]


def test_final_score_hand_computed() -> None:
    score = modes.final_score(activation=0.8, importance=0.5, retention=0.25, utility=0.6,
                              weights=modes.MODES["general"])
    assert score == pytest.approx(0.4 * 0.8 + 0.3 * 0.5 + 0.2 * 0.25 + 0.1 * 0.6)
    relevance = modes.final_score(activation=0.8, importance=1.0, retention=1.0, utility=1.0,
                                  weights=modes.MODES["relevance"])
    assert relevance == pytest.approx(0.8)


def test_final_score_rejects_bad_input() -> None:
    w = modes.MODES["general"]
    with pytest.raises(InvalidInputError):
        modes.final_score(activation=float("nan"), importance=0.5, retention=0.5, utility=0.5,
                          weights=w)
    with pytest.raises(InvalidInputError):
        modes.final_score(activation=0.5, importance=1.5, retention=0.5, utility=0.5, weights=w)


def test_rerank_blend() -> None:
    assert modes.rerank_blend(0.5, 0.0) == pytest.approx(0.4 * 0.5 + 0.6 * 0.5)
    assert modes.rerank_blend(1.0, 2.0) == pytest.approx(0.4 + 0.6 / (1 + math.exp(-2.0)))
    assert modes.rerank_blend(0.0, -1000.0) == 0.0  # no overflow
    assert modes.rerank_blend(0.0, 1000.0) == pytest.approx(0.6)


@PROPS
@given(
    st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
    st.sampled_from(sorted(m for m, w in modes.MODES.items()
                           if isinstance(w, modes.ModeWeights))),
)
def test_final_score_in_unit_interval_for_unit_inputs(
    a: float, imp: float, r: float, u: float, mode: str
) -> None:
    score = modes.final_score(activation=a, importance=imp, retention=r, utility=u,
                              weights=modes.mode_weights(mode))
    assert -1e-12 <= score <= 1.0 + 1e-12
