"""Checks for the exercises of the chapter "Core inflation: does weight decay keep adding rotations?"."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..experiments.modular_runs import first_rank_at_or_below
from . import Case, check_function

__all__ = ["check_necessary_rank"]

NONE_SHOWN_AS = -1  # how the check shows an answer of None (the comparison needs a number)


def _library(remove: np.ndarray, energy_rank: int, level: float) -> int:
    curves = {"rank": np.arange(1, len(remove) + 1), "energy_rank": [energy_rank], "remove": [remove]}
    got = first_rank_at_or_below(curves, level)[0]
    return NONE_SHOWN_AS if got is None else got


def _removal_curve(d: int, bulk: int, residue: float, seed: int, p: int = 53) -> np.ndarray:
    """A curve like the trained models': accuracy falls over the first ``bulk`` removed directions,
    then hovers around ``residue`` (chance plus a thin remainder of the answer), with noise that
    lets it cross a threshold near ``residue`` more than once."""
    rng = np.random.default_rng(seed)
    r = np.arange(1, d + 1)
    fall = 1 / (1 + np.exp((r - bulk) / 1.5))
    noise = rng.normal(0, 0.006, d)
    return np.clip(fall * (1 - residue) + residue + noise, 0, 1)


def check_necessary_rank(necessary_rank: Callable) -> bool:
    """Check ``necessary_rank(remove, energy_rank, level)``: the smallest rank r >= ``energy_rank``
    whose removal leaves accuracy ``remove[r - 1] <= level`` (ranks count from 1), or None when no
    rank does. The check shows None as -1."""
    chance = 2 / 53
    bounce = np.array([0.9, 0.5, 0.2, 0.03, 0.05, 0.04, 0.02, 0.01])  # crosses 2/p at 4, rises, then stays
    early = np.array([0.01, 0.6, 0.3, 0.1, 0.02, 0.01])  # below the level at rank 1, under the energy rank
    exact = np.array([0.9, 0.4, 0.1, 0.05, 0.05, 0.01])
    inputs = [
        (bounce, 1, chance, "a curve that crosses 2/p at rank 4, rises above it, then falls again"),
        (early, 3, chance, "accuracy is low at rank 1, below the energy rank 3"),
        (exact, 1, 0.05, "accuracy exactly at the level at rank 4"),
        (np.linspace(1.0, 0.2, 10), 2, chance, "a curve that never gets to 2/p: None"),
        (np.array([0.01, 0.01, 0.01]), 1, chance, "removing one direction is enough"),
        (_removal_curve(128, 14, 0.045, 1), 12, chance, "a trained-model-like curve, 128 ranks"),
        (_removal_curve(128, 30, 0.04, 2), 25, 0.1, "a trained-model-like curve at the looser level 0.1"),
        (_removal_curve(128, 40, 0.038, 3), 10, chance, "a trained-model-like curve whose residue sits at 2/p"),
    ]
    cases = [Case((r, e, lv), _library(r, e, lv), what) for r, e, lv, what in inputs]

    def shown(remove, energy_rank, level):
        got = necessary_rank(np.array(remove), energy_rank, level)
        return NONE_SHOWN_AS if got is None else got

    def first(mask, offset=1):
        hits = np.flatnonzero(mask)
        return NONE_SHOWN_AS if not hits.size else int(hits[0]) + offset

    def from_where_it_stays(remove, energy_rank, level):
        above = np.flatnonzero(remove > level)
        r = (int(above[-1]) + 2) if above.size else 1
        return max(r, energy_rank) if r <= len(remove) else NONE_SHOWN_AS

    hints = [
        (
            lambda got, c: got == from_where_it_stays(*c.args),
            "take the first rank at or below the level, even if the curve rises above it again at a larger rank "
            "(the chapter's search stops at the first crossing).",
        ),
        (
            lambda got, c: got == first(c.args[0] <= c.args[2]),
            "start at the energy rank: the necessary rank is the smallest rank at least the energy rank.",
        ),
        (
            lambda got, c: got == first((c.args[0] < c.args[2]) & (np.arange(1, len(c.args[0]) + 1) >= c.args[1])),
            "'at or below': an accuracy equal to the level counts (<=, not <).",
        ),
        (
            lambda got, c: c.expected != NONE_SHOWN_AS and got == c.expected - 1,
            "ranks count from 1: remove[0] is the accuracy with one direction removed, so rank = index + 1.",
        ),
        (lambda got, c: c.expected == NONE_SHOWN_AS, "when no rank gets that low, return None."),
    ]
    return check_function(shown, cases, name="necessary_rank", hints=hints, atol=0)
