"""The Markov chapter's experiment repeated from other seeds: sets of models, compared pair by pair.

The chapter trains one set of models (``MarkovParams.seeds``) and compares its cores with the
paper's Table A2. Some of its numbers fall outside the paper's ranges, which are the spread of
the paper's own single set of three models. Whether another draw of models lands inside them is
a question about seeds: :func:`seed_sets` runs the chapter's own :func:`markov_chain.run` for the
chapter's set and for each other set of seeds, everything else unchanged, and gathers per pair of
models the quantities the chapter holds to the paper (each set is cached in the store as the
chapter's run is). Whether they pass the paper's tolerances is judged by the chapter and its
figures module (:mod:`corelib.claims`), not here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._checks import check_seeds
from . import markov_chain
from .markov_chain import MarkovParams, MarkovSummary

__all__ = ["SeedSets", "from_summaries", "seed_sets"]


@dataclass(frozen=True)
class SeedSets:
    """Several sets of models trained with the same settings from different seeds, each set's
    pairs compared as the chapter compares its own. S sets of M models each, P = M (M - 1) / 2
    pairs per set in the order of ``itertools.combinations`` (the order of
    :attr:`MarkovSummary.pairs`); A is the largest core rank of any model.

    Attributes:
        seeds: the training seeds of each set, (S, M); the first set is the chapter's own.
        ranks: each model's core rank, (S, M).
        third: the third canonical correlation of each pair, (S, P); NaN where a core of the
            pair has fewer than three directions.
        mean: the mean of each pair's canonical correlations (all of them, as the claim
            ``markov.cca_mean``), (S, P).
        overlap: each pair's projector overlap, in [0, 1], (S, P).
        angles: each pair's principal angles in degrees, smallest first, (S, P, A); NaN beyond
            the pair's smaller rank.
    """

    seeds: tuple[tuple[int, ...], ...]
    ranks: np.ndarray
    third: np.ndarray
    mean: np.ndarray
    overlap: np.ndarray
    angles: np.ndarray


def from_summaries(summaries: Sequence[MarkovSummary]) -> SeedSets:
    """The pairs' quantities of each run's summary, one set per summary, in the order given.

    Every summary must hold the same number of models (the pairs of the sets line up)."""
    if not summaries:
        raise ValueError("from_summaries needs at least one summary (one set of models); got none.")
    sizes = {len(s.models) for s in summaries}
    if len(sizes) != 1:
        raise ValueError(
            f"every set must hold the same number of models so that their pairs line up; got sets of {sorted(sizes)}. "
            "Give every set of seeds as many seeds as the chapter's."
        )
    top = max(m.rank for s in summaries for m in s.models)
    shape = (len(summaries), len(summaries[0].pairs))
    third, mean, overlap = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    angles = np.full((*shape, top), np.nan)
    for k, summary in enumerate(summaries):
        for q, pair in enumerate(summary.pairs):
            third[k, q] = pair.cca[2] if len(pair.cca) > 2 else np.nan
            mean[k, q] = float(np.mean(pair.cca))
            overlap[k, q] = pair.overlap
            angles[k, q, : len(pair.angles)] = pair.angles
    return SeedSets(
        seeds=tuple(tuple(m.seed for m in s.models) for s in summaries),
        ranks=np.array([[m.rank for m in s.models] for s in summaries]),
        third=third,
        mean=mean,
        overlap=overlap,
        angles=angles,
    )


def _other_sets(params: MarkovParams, other: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The other sets, checked: each as many distinct seeds as the chapter's, no set twice."""
    if isinstance(other, (str, bytes)) or not hasattr(other, "__iter__"):
        raise ValueError(f"other_seeds must be a list of sets of seeds, e.g. [[1, 2, 3], [4, 5, 6]]; got {other!r}.")
    sets = [check_seeds("other_seeds", s, at_least=2, name="each set of other_seeds") for s in other]
    wrong = [s for s in sets if len(s) != len(params.seeds)]
    if wrong:
        raise ValueError(
            f"each set of other_seeds must hold {len(params.seeds)} seeds, as the chapter's {list(params.seeds)} "
            f"does, so that its pairs line up with the chapter's; got {list(wrong[0])}."
        )
    seen = [frozenset(params.seeds)]
    for s in sets:
        if frozenset(s) in seen:
            raise ValueError(
                f"the set of seeds {list(s)} is the chapter's or is listed twice in other_seeds: it would train the "
                "same models again. Give every set other seeds."
            )
        seen.append(frozenset(s))
    return sets


def seed_sets(params: MarkovParams, other: Sequence[Sequence[int]], *, progress: bool = False) -> SeedSets:
    """The chapter's set of models (``params.seeds``) and each set of ``other`` seeds, trained and
    analysed by :func:`markov_chain.run` with ``params``' other settings (cached: a set already
    trained is read back), gathered by :func:`from_summaries`; the chapter's set first."""
    runs = [params, *(replace(params, seeds=s) for s in _other_sets(params, other))]
    return from_summaries([markov_chain.run(p, progress=progress) for p in runs])


def pair_names(seeds: Sequence[int]) -> list[str]:
    """The pairs of one set, named by their seeds ("0 & 100"), in the order of :attr:`SeedSets.third`."""
    return [f"{a} & {b}" for a, b in itertools.combinations(seeds, 2)]
