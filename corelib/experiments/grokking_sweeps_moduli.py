"""The modulus law near its critical modulus: the grokking-sweeps chapter's open question, tested.

The recorded modulus sweep (p = 31 ... 101 at weight decay 1) lies well above the fitted critical
modulus, where the delays pin down the product ``Omega * p_crit`` far better than either constant.
Moduli close to ``p_crit`` separate them: there ``-log(1 - p_crit / p)`` is far from
``p_crit / p``. This module adds the conditions at :data:`NEAR_MODULI`, trained at the paper's
settings (``python -m acebook.paper_runs advance grokking_sweeps --moduli 29 23``) and recorded
as ``grokking_sweeps_moduli``, to the recorded sweep, and fits the law with and without them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..tasks.sweeps import bootstrap_fit, grok_time_constants, summarise
from .grokking_sweeps import SweepsParams, constant

__all__ = [
    "NEAR_MODULI",
    "ModulusLaw",
    "finding_values",
    "fits_table",
    "glue_values",
    "modulus_law",
    "modulus_sweep_hours",
    "near_params",
]

NEAR_MODULI = (23, 29)
"""The moduli added near the critical modulus (the paper's ≈ 23; the recorded fit's ≈ 21)."""


def near_params(params: SweepsParams) -> SweepsParams:
    """The recorded sweep's settings with the modulus sweep at :data:`NEAR_MODULI` only."""
    return replace(params, moduli=NEAR_MODULI)


@dataclass(frozen=True)
class ModulusLaw:
    """The modulus law fitted to the recorded moduli alone and with the near moduli added.

    Attributes:
        table: one row per condition and seed of both (the recorded moduli first).
        summary: per modulus, seed counts and the mean delay (:func:`corelib.tasks.sweeps.summarise`).
        without, with_near: the bootstrap fits (rows ``Omega``, ``p_crit``, ``Omega_p_crit``,
            ``r2``; columns ``estimate``, ``sd``, ``ci_low``, ``ci_high``), ``with_near`` None when
            the near moduli have too few grokked seeds to fit.
        near: the moduli added.
    """

    table: pd.DataFrame
    summary: pd.DataFrame
    without: pd.DataFrame
    with_near: pd.DataFrame | None
    near: tuple[int, ...]


def modulus_law(recorded_table: pd.DataFrame, near_table: pd.DataFrame, n_boot: int, seed: int = 0) -> ModulusLaw:
    """Fit the modulus law to ``recorded_table`` alone and with ``near_table`` added (both one
    row per condition and seed, as the sweeps keep them)."""
    table = pd.concat([recorded_table, near_table], ignore_index=True)
    without = bootstrap_fit(recorded_table, "p", grok_time_constants, n_boot=n_boot, seed=seed)
    try:
        with_near = bootstrap_fit(table, "p", grok_time_constants, n_boot=n_boot, seed=seed)
    except (ValueError, RuntimeError):
        with_near = None
    return ModulusLaw(table, summarise(table, "p"), without, with_near, tuple(sorted(set(near_table["p"]))))


def _relative_sd(fit: pd.DataFrame | None, name: str) -> float:
    estimate, sd = constant(fit, name)
    return sd / abs(estimate) if np.isfinite(estimate) and estimate else float("nan")


def finding_values(law: ModulusLaw, weight_decay: float) -> dict[str, float]:
    """The findings ``sweeps.near_Omega_sd`` (the relative bootstrap sd of ``Omega`` with the near
    moduli over without) and ``sweeps.near_Omega`` (``Omega`` at weight decay 1 with them)."""
    return {
        "sweeps.near_Omega_sd": _relative_sd(law.with_near, "Omega") / _relative_sd(law.without, "Omega"),
        "sweeps.near_Omega": constant(law.with_near, "Omega")[0] * weight_decay,
    }


def glue_values(law: ModulusLaw | None, weight_decay: float) -> dict[str, object]:
    """The numbers the chapter glues ("n/a" without the near moduli's record)."""
    names = ("near_moduli", "near_grokked", "near_runs", "near_Omega", "near_Omega_sd_pct", "near_p_crit",
             "near_p_crit_sd", "far_Omega_sd_pct", "far_p_crit_sd")  # fmt: skip
    if law is None:  # numbers as NaN, so that a format spec in the prose still applies
        return dict.fromkeys(names, float("nan")) | {"near_moduli": "n/a"}
    near = law.summary.loc[list(law.near)]
    omega, p_crit = constant(law.with_near, "Omega"), constant(law.with_near, "p_crit")
    return {
        "near_moduli": ", ".join(str(p) for p in law.near),
        "near_grokked": int(near["n_grokked"].sum()),
        "near_runs": int(near["n_seeds"].sum()),
        "near_Omega": round(omega[0] * weight_decay),
        "near_Omega_sd_pct": 100 * _relative_sd(law.with_near, "Omega"),
        "near_p_crit": p_crit[0],
        "near_p_crit_sd": p_crit[1],
        "far_Omega_sd_pct": 100 * _relative_sd(law.without, "Omega"),
        "far_p_crit_sd": constant(law.without, "p_crit")[1],
    }


def fits_table(law: ModulusLaw, weight_decay: float) -> pd.DataFrame:
    """``Omega`` (at weight decay 1) and ``p_crit``, estimate and bootstrap sd, fitted without and
    with the near moduli (columns), one row per constant."""
    rows = {}
    for label, fit in (("recorded moduli", law.without), ("with " + ", ".join(map(str, law.near)), law.with_near)):
        omega, p_crit = constant(fit, "Omega"), constant(fit, "p_crit")
        rows[label] = {
            "Ω at ω = 1 (steps)": f"{omega[0] * weight_decay:.0f} ± {omega[1] * weight_decay:.0f}",
            "p_crit": f"{p_crit[0]:.1f} ± {p_crit[1]:.1f}",
        }
    return pd.DataFrame(rows)


def modulus_sweep_hours(recorded) -> float:
    """CPU hours the recorded modulus sweep took (its conditions' wall seconds from the record's
    provenance); NaN without a record or where a condition was not timed."""
    if recorded is None:
        return float("nan")
    seconds = recorded.provenance.get("training_seconds", {})
    wanted = [c.label() for c in recorded.params.p_conditions()]
    timed = [seconds.get(label) for label in wanted]
    return float("nan") if any(t is None for t in timed) else sum(timed) / 3600
