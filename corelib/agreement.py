"""Whether a re-derivation agrees with its record at the level the claims are made.

A record (a recorded paper-scale run) is re-derived from scratch to show that the code still
computes it. On the record's own machine, code and thread count the re-derivation is identical to
the last bit. Elsewhere the kernels round differently, training amplifies the last bit, and each
seed follows its own trajectory: its exact grokking step or rank at one snapshot is chaotic, while
their distribution over seeds, which is what the claims rest on, is not. So two comparisons are
made:

- **exact**: every value, integers and strings exactly and floats within an absolute ``tolerance``;
  it holds only where the rounding is the record's;
- **statistical**: every scalar quantity measured per seed (a snapshot's rank, a seed's delay) is
  gathered over the seeds, and the re-derived mean must lie within
  ``max(k x seed standard error, envelope)`` of the recorded mean, where the seed standard error
  is that of the difference of the two means, ``sqrt(s_r^2 / n_r + s_d^2 / n_d)`` from both
  samples' spread over the seeds (Welch's), and the envelope is the smallest difference that
  rounding alone produces for that kind of quantity (one unit for whole numbers such as ranks and
  steps, :data:`FLOAT_ENVELOPE` for the rest). Welch's two-sample t statistic and its p-value are
  reported beside it. Both samples' spread counts because a record can have none by chance: three
  seeds that all score 0 at an early snapshot, of which one scores a single test pair on another
  CPU, moved by rounding, not by a change of the code. With few seeds the test has little power
  against a re-derivation whose spread is much larger than the record's; the exact comparison
  and the per-seed values it prints are there to see that.

A re-derivation *agrees* when every quantity passes the statistical test; it is *identical* when
the exact comparison finds nothing. ``benchmarks/rounding_envelope.py`` measures how far values
move under perturbations at rounding level on one machine.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from .recorded import compare_values

__all__ = [
    "FLOAT_ENVELOPE",
    "SEED_ERRORS",
    "Agreement",
    "QuantityAgreement",
    "compare",
    "snapshot_groups",
    "seed_record_groups",
]

SEED_ERRORS = 2.0  # a mean may move by this many standard errors of the difference of the means
FLOAT_ENVELOPE = 1e-4  # the smallest allowed difference of a float's mean (accuracies, R^2, fractions)


@dataclass(frozen=True)
class QuantityAgreement:
    """One quantity, measured per seed, in the record and in its re-derivation.

    Attributes:
        name: where it is, e.g. ``"wd · epoch 1000 · core_dim"`` or ``"p=53 wd=3 B=512 · delay"``.
        recorded: the recorded per-seed values, shape (n_seeds,).
        rederived: the re-derived per-seed values, shape (n_seeds,).
        seed_error: the standard error of the difference of the two means,
            ``sqrt(s_r^2 / n_r + s_d^2 / n_d)`` (each ``s`` the sample's sd over its seeds).
        allowed: the largest difference of the means that counts as agreement.
        t: Welch's t statistic of the two samples (0 when both have no spread and equal means).
        p: its two-sided p-value (1 when t is 0).
    """

    name: str
    recorded: np.ndarray
    rederived: np.ndarray
    seed_error: float
    allowed: float
    t: float
    p: float

    @property
    def difference(self) -> float:
        """Re-derived minus recorded mean."""
        return float(np.mean(self.rederived) - np.mean(self.recorded))

    @property
    def agrees(self) -> bool:
        return abs(self.difference) <= self.allowed


@dataclass(frozen=True)
class Agreement:
    """A re-derivation against its record.

    Attributes:
        n_values: the values compared exactly (every number of the records).
        differences: the exact comparison's differences, worded as
            :func:`corelib.recorded.compare_values` words them (empty: identical).
        quantities: the statistical comparison, one entry per quantity measured per seed.
    """

    n_values: int
    differences: tuple[str, ...]
    quantities: tuple[QuantityAgreement, ...]

    @property
    def identical(self) -> bool:
        """Every value equal to the record's (within the exact comparison's tolerance)."""
        return not self.differences

    @property
    def agrees(self) -> bool:
        """Every quantity's re-derived mean within its allowed difference of the recorded one."""
        return all(q.agrees for q in self.quantities)

    @property
    def beyond(self) -> tuple[QuantityAgreement, ...]:
        """The quantities that moved by more than they may."""
        return tuple(q for q in self.quantities if not q.agrees)

    @property
    def n_moved(self) -> int:
        """Quantities whose per-seed values are not all equal to the record's."""
        return sum(not np.array_equal(q.recorded, q.rederived) for q in self.quantities)

    @property
    def largest_z(self) -> float:
        """The largest mean difference in standard errors of the difference (0 when nothing moved)."""
        z = [abs(q.difference) / q.seed_error for q in self.quantities if q.seed_error > 0]
        return max(z, default=0.0)


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _whole(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def snapshot_groups(records: Iterable[Any], where: str = "") -> dict[str, list[float]]:
    """Per-seed scalars of snapshot records, by quantity: ``{"<where> · epoch e · field": [one
    value per seed]}``. A record is a dataclass with ``epoch`` and ``models`` (one dataclass per
    seed), or its JSON form (``{"epoch": e, "models": [per-seed dicts]}``). A sequence field counts
    by its length (a snapshot's ``modes`` become its mode count); None and NaN values are left out."""
    groups: dict[str, list[float]] = {}
    for record in records:
        named = _fields(record)
        for model in named.get("models", []):
            for field, value in _fields(model).items():
                if isinstance(value, (list, tuple)) and field == "modes":
                    field, value = "mode count", len(value)
                if _scalar(value) and not (isinstance(value, float) and math.isnan(value)):
                    key = " · ".join(p for p in (where, f"epoch {named['epoch']}", field) if p)
                    groups.setdefault(key, []).append(float(value))
    return groups


def _fields(record: Any) -> Mapping[str, Any]:
    """A record's fields by name: a mapping as it is, a dataclass's fields in their order."""
    if isinstance(record, Mapping):
        return record
    if is_dataclass(record):
        return {f.name: getattr(record, f.name) for f in fields(record)}
    raise TypeError(f"a snapshot record is a dataclass or a dict, got {type(record).__name__}.")


def seed_record_groups(
    records: Iterable[Mapping[str, Any] | None], fields: Iterable[str], where: str = ""
) -> dict[str, list[float]]:
    """Per-seed scalars of one-record-per-seed lists (the sweeps' seed records), by quantity:
    ``{"<where> · field": [one value per seed]}``; a seed without the value (None) is left out."""
    groups: dict[str, list[float]] = {}
    for record in records:
        for field in fields:
            value = None if record is None else record.get(field)
            if _scalar(value):
                groups.setdefault(" · ".join(p for p in (where, field) if p), []).append(float(value))
    return groups


def _welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if np.array_equal(a, b) or (np.ptp(a) == 0 and np.ptp(b) == 0 and a.mean() == b.mean()):
        return 0.0, 1.0
    if len(a) < 2 or len(b) < 2 or np.ptp(a) == 0 and np.ptp(b) == 0:
        return math.inf, 0.0
    with warnings.catch_warnings():
        # Values that moved only in their last bits: scipy warns that t is unreliable, and it is
        # only printed; agreement is decided by the means' difference against the allowed one.
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    return float(result.statistic), float(result.pvalue)


def _variance_of_mean(x: np.ndarray) -> float:
    """``s^2 / n`` of a sample of at least two values."""
    return float(np.var(x, ddof=1) / len(x))


def _quantity(name: str, recorded: list[float], rederived: list[float], seed_errors: float) -> QuantityAgreement:
    a, b = np.asarray(recorded, dtype=float), np.asarray(rederived, dtype=float)
    # With one value on either side there is no spread to estimate there: the envelope alone decides.
    error = math.sqrt(_variance_of_mean(a) + _variance_of_mean(b)) if min(len(a), len(b)) > 1 else 0.0
    envelope = 1.0 if _whole(a) and _whole(b) else FLOAT_ENVELOPE
    t, p = _welch(a, b)
    return QuantityAgreement(name, a, b, error, max(seed_errors * error, envelope), t, p)


def compare(
    recorded: Any,
    rederived: Any,
    recorded_groups: Mapping[str, list[float]],
    rederived_groups: Mapping[str, list[float]],
    *,
    tolerance: float = 1e-6,
    seed_errors: float = SEED_ERRORS,
) -> Agreement:
    """Compare a re-derivation with its record, exactly (``recorded`` against ``rederived``, whole
    trees) and statistically (the per-seed groups, as :func:`snapshot_groups` or
    :func:`seed_record_groups` gather them from each). A quantity present in only one of the two
    is a difference of both comparisons."""
    differences = [d.removeprefix(".") for d in compare_values(recorded, rederived, tolerance)]
    quantities, missing = [], []
    for name in sorted(set(recorded_groups) | set(rederived_groups)):
        if name not in recorded_groups or name not in rederived_groups:
            missing.append(name)
            continue
        quantities.append(_quantity(name, recorded_groups[name], rederived_groups[name], seed_errors))
    for name in missing:  # a value the other side lacks: never within any envelope
        have = recorded_groups.get(name) or rederived_groups.get(name) or [0.0]
        quantities.append(QuantityAgreement(name, np.asarray(have), np.asarray([math.inf]), 0.0, 0.0, math.inf, 0.0))
    return Agreement(_count(recorded), tuple(differences), tuple(quantities))


def _count(tree: Any) -> int:
    """The number of leaf values of a record tree."""
    if isinstance(tree, Mapping):
        return sum(_count(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(_count(v) for v in tree)
    return 1
