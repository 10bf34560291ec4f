"""The grokking-sweeps chapter (the paper's Figure 4): run both sweeps, fit them, and say what
the chapter quotes. Training and the fits live in :mod:`corelib.tasks.sweeps`; this module arranges
them for the chapter."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from corelib import claims
from corelib._checks import (
    check_decay,
    check_distinct,
    check_memory,
    check_seed,
    check_settings,
    check_split,
    check_workers,
    is_whole,
)
from corelib.engine import resolve_precision
from corelib.models import default_device
from corelib.tasks.sweeps import (
    PAPER_SWEEPS,
    Condition,
    SweepConfig,
    batch_plan,
    bootstrap_fit,
    grok_time_constants,
    min_correct,
    power_law_constants,
    run_sweep,
    summarise,
    usable_delays,
)

__all__ = [
    "SweepsParams",
    "SweepsSummary",
    "RecordedSweeps",
    "run",
    "summarise_sweeps",
    "constants_table",
    "styled_constants_table",
    "recorded_glue_values",
    "claim_values",
    "claim_settings",
    "glue_values",
    "format_number",
    "format_steps",
]


@dataclass(frozen=True)
class SweepsParams:
    """The chapter's parameters; defaults are the paper's (see its ``parameters`` cell)."""

    # The sweeps' layout is the paper's (PAPER_SWEEPS); the model and optimiser are SweepConfig's.
    n_seeds: int = PAPER_SWEEPS["n_seeds"]
    omega_p: int = PAPER_SWEEPS["omega_p"]
    omegas: tuple[float, ...] = tuple(PAPER_SWEEPS["omegas"])
    omega_batch_size: int | None = PAPER_SWEEPS["omega_batch_size"]
    omega_max_epochs: int = PAPER_SWEEPS["omega_max_epochs"]
    moduli: tuple[int, ...] = tuple(PAPER_SWEEPS["moduli"])
    p_weight_decay: float = PAPER_SWEEPS["p_weight_decay"]
    p_batch_size: int | None = PAPER_SWEEPS["p_batch_size"]
    p_max_epochs: int = PAPER_SWEEPS["p_max_epochs"]
    d_model: int = SweepConfig.d_model
    n_heads: int = SweepConfig.n_heads
    d_ff: int = SweepConfig.d_ff
    n_layers: int = SweepConfig.n_layers
    lr: float = SweepConfig.lr
    dropout: float = SweepConfig.dropout
    train_fraction: float = SweepConfig.train_fraction
    split_seed: int = SweepConfig.split_seed
    threshold: float = SweepConfig.threshold
    patience_epochs: int = SweepConfig.patience_epochs
    precision: str = SweepConfig.precision
    n_boot: int = 1000
    n_jobs: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "precision", resolve_precision(self.precision, default_device()))
        if isinstance(self.omegas, (str, bytes)) or isinstance(self.moduli, (str, bytes)):
            raise ValueError("SweepsParams: omegas and moduli must be lists of numbers, e.g. omegas=[1, 2, 3].")
        object.__setattr__(self, "omegas", tuple(self.omegas))
        object.__setattr__(self, "moduli", tuple(self.moduli))
        if not self.omegas or not self.moduli:
            raise ValueError("SweepsParams: omegas and moduli must each list at least one value.")
        check_settings(
            "SweepsParams",
            integers={
                "n_seeds": self.n_seeds,
                "n_boot": self.n_boot,
                **{k: getattr(self, k) for k in ("d_model", "n_heads", "d_ff", "n_layers")},
                **{
                    f"{k}": getattr(self, k)
                    for k in ("omega_batch_size", "p_batch_size")
                    if getattr(self, k) is not None
                },
            },
            epochs={"omega_max_epochs": self.omega_max_epochs, "p_max_epochs": self.p_max_epochs},
            rates={"lr": self.lr},
            positive={
                **{f"omegas[{i}]": w for i, w in enumerate(self.omegas)},
                "p_weight_decay": self.p_weight_decay,
            },
            non_negative={"patience_epochs": self.patience_epochs, "dropout": self.dropout},
            fractions={"threshold": self.threshold},
        )
        check_split("SweepsParams", self.train_fraction)
        check_workers("SweepsParams", self.n_jobs)
        check_seed("SweepsParams", "split_seed", self.split_seed)
        for w in (*self.omegas, self.p_weight_decay):
            check_decay("SweepsParams", self.lr, w, "the weight decay")
        not_moduli = [q for q in (self.omega_p, *self.moduli) if not is_whole(q) or q < 3]
        if not_moduli:
            raise ValueError(f"SweepsParams: moduli must be whole numbers of at least 3, got {not_moduli}.")
        object.__setattr__(self, "omegas", tuple(float(w) for w in self.omegas))
        object.__setattr__(self, "moduli", tuple(int(q) for q in self.moduli))
        check_distinct("SweepsParams", "omegas", self.omegas)
        check_distinct("SweepsParams", "moduli", self.moduli)
        largest = max(self.omega_p, *self.moduli)
        check_memory(
            "SweepsParams", "the largest of moduli", largest, 24.0 * largest**2, "its p² input pairs", "modulus"
        )
        if not self.dropout < 1:
            raise ValueError(f"SweepsParams: dropout must be below 1 (1 drops everything), got {self.dropout!r}.")

    @classmethod
    def from_namespace(cls, namespace: dict) -> SweepsParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    @property
    def seeds(self) -> list[int]:
        """Model seeds 42, 43, ...: one per model of a condition."""
        return [42 + s for s in range(self.n_seeds)]

    def config(self, max_epochs: int) -> SweepConfig:
        """What every condition of a sweep shares, with the sweep's cap."""
        return SweepConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            n_layers=self.n_layers,
            lr=self.lr,
            dropout=self.dropout,
            train_fraction=self.train_fraction,
            split_seed=self.split_seed,
            threshold=self.threshold,
            patience_epochs=self.patience_epochs,
            max_epochs=max_epochs,
            precision=self.precision,
        )

    def omega_conditions(self) -> list[Condition]:
        return [Condition(p=self.omega_p, weight_decay=w, batch_size=self.omega_batch_size) for w in self.omegas]

    def p_conditions(self) -> list[Condition]:
        return [Condition(p=q, weight_decay=self.p_weight_decay, batch_size=self.p_batch_size) for q in self.moduli]

    def plans(self) -> list[tuple[Condition, SweepConfig]]:
        """Every condition of both sweeps, the weight-decay sweep's first, each with its sweep's
        configuration (a condition in both sweeps appears twice)."""
        omega, p = self.config(self.omega_max_epochs), self.config(self.p_max_epochs)
        return [(c, omega) for c in self.omega_conditions()] + [(c, p) for c in self.p_conditions()]

    def plan(self, label: str) -> tuple[Condition, SweepConfig]:
        """The condition labelled ``label`` (e.g. ``"p=53 wd=3 B=512"``) and its sweep's configuration."""
        plans = self.plans()
        for cond, cfg in plans:
            if cond.label() == label:
                return cond, cfg
        raise ValueError(
            f"no condition {label!r} in these sweeps; choose one of {sorted({c.label() for c, _ in plans})}."
        )


@dataclass(frozen=True)
class SweepsSummary:
    """The two sweeps of a build: per-seed tables, per-condition summaries and the bootstrap fits.

    Attributes:
        params: the chapter's parameters.
        table_omega, table_p: one row per condition and seed (:data:`corelib.tasks.sweeps.RECORD_FIELDS`:
            ``t_mem``, ``t_gen`` and ``delay`` in optimizer steps, NaN where a seed did not grok),
            for the weight-decay sweep and the modulus sweep.
        summary_omega, summary_p: per condition (indexed by ``weight_decay`` or ``p``), the mean
            and standard error of the delays over the grokked seeds (:func:`corelib.tasks.sweeps.summarise`).
        fit_omega: the power law ``tau = C omega^exponent`` (rows ``exponent``, ``C``, ``r2``;
            columns ``estimate``, ``sd``, ``ci_low``, ``ci_high``), None when too few conditions grokked.
        fit_p: the grokking-time law (rows ``Omega``, ``p_crit``, ``Omega_p_crit``, ``r2``), or None.
        paper: the paper's ``omega_exponent``, ``Omega`` and ``p_crit`` (claims registry).
    """

    params: SweepsParams
    table_omega: pd.DataFrame
    table_p: pd.DataFrame
    summary_omega: pd.DataFrame
    summary_p: pd.DataFrame
    fit_omega: pd.DataFrame | None
    fit_p: pd.DataFrame | None
    paper: dict[str, float]


@dataclass(frozen=True)
class RecordedSweeps(SweepsSummary):
    """The recorded paper-scale sweeps, summarised as a build's own
    (:func:`corelib.experiments.paper_scale.recorded_sweeps`).

    Attributes:
        provenance: the record's provenance (profile, parameters, code, machine, precision, times).
        source: one line naming the record, for captions.
    """

    provenance: dict
    source: str


def _fit_or_none(table: pd.DataFrame, by: str, fit, n_boot: int) -> pd.DataFrame | None:
    """Bootstrap fit, or None when too few conditions have grokked seeds (e.g. tiny smoke runs)."""
    try:
        return bootstrap_fit(table, by, fit, n_boot=n_boot, seed=0)
    except (ValueError, RuntimeError) as err:
        print(f"no fit for the {by} sweep: {err}")
        return None


def run(params: SweepsParams) -> SweepsSummary:
    """Both sweeps (trained, or read back from their records), their summaries and bootstrap fits."""
    table_omega = run_sweep(
        params.omega_conditions(), params.seeds, params.config(params.omega_max_epochs), n_jobs=params.n_jobs
    )
    table_p = run_sweep(params.p_conditions(), params.seeds, params.config(params.p_max_epochs), n_jobs=params.n_jobs)
    return summarise_sweeps(params, table_omega, table_p)


def summarise_sweeps(params: SweepsParams, table_omega: pd.DataFrame, table_p: pd.DataFrame) -> SweepsSummary:
    """Summaries and bootstrap fits of the two sweeps' tables (one row per condition and seed)."""
    return SweepsSummary(
        params=params,
        table_omega=table_omega,
        table_p=table_p,
        summary_omega=summarise(table_omega, "weight_decay"),
        summary_p=summarise(table_p, "p"),
        fit_omega=_fit_or_none(table_omega, "weight_decay", power_law_constants, params.n_boot),
        fit_p=_fit_or_none(table_p, "p", grok_time_constants, params.n_boot),
        paper={k: claims.claim(f"sweeps.{k}").value for k in ("omega_exponent", "Omega", "p_crit")},
    )


def constant(fit: pd.DataFrame | None, name: str) -> tuple[float, float]:
    """(estimate, bootstrap sd) of a fitted constant; NaN when there is no fit."""
    if fit is None:
        return float("nan"), float("nan")
    return float(fit.loc[name, "estimate"]), float(fit.loc[name, "sd"])


def _table_number(x: float) -> str:
    """A number in the constants table: whole from 100 on (with thousands separators), else 3
    significant digits."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def constants_table(summary: SweepsSummary) -> pd.DataFrame:
    """One row per fitted constant of both sweeps: estimate, bootstrap sd, the sd as a share of
    the estimate, 95 % interval, and the paper's value where it reports one. The paper's ``Omega``
    (and the product ``Omega * p_crit``) is divided by the modulus sweep's weight decay, as the
    theory predicts (``Omega`` proportional to ``1 / omega``); at weight decay 1 it is the paper's own."""
    params, paper = summary.params, summary.paper
    at_omega = paper["Omega"] / params.p_weight_decay
    paper_values = {
        "omega": {"exponent": paper["omega_exponent"]},
        "p": {"Omega": at_omega, "p_crit": paper["p_crit"], "Omega_p_crit": at_omega * paper["p_crit"]},
    }
    rows = []
    for key, sweep, fit in (
        ("omega", f"tau vs omega (p = {params.omega_p})", summary.fit_omega),
        ("p", f"tau vs p (omega = {params.p_weight_decay:g})", summary.fit_p),
    ):
        for name, r in [] if fit is None else fit.iterrows():
            rows.append(
                {
                    "sweep": sweep,
                    "constant": name,
                    "estimate": r["estimate"],
                    "bootstrap sd": r["sd"],
                    "sd (% of estimate)": 100 * r["sd"] / abs(r["estimate"]) if r["estimate"] else float("nan"),
                    "95% interval": f"[{_table_number(r['ci_low'])}, {_table_number(r['ci_high'])}]",
                    "paper": paper_values[key].get(name, float("nan")),
                }
            )
    columns = ["sweep", "constant", "estimate", "bootstrap sd", "sd (% of estimate)", "95% interval", "paper"]
    return pd.DataFrame(rows, columns=columns)


def styled_constants_table(summary: SweepsSummary):
    """:func:`constants_table` formatted for the page (a pandas Styler; empty cells where the paper
    reports no value)."""
    number = _table_number
    formats = {"estimate": number, "bootstrap sd": number, "sd (% of estimate)": "{:.2g}", "paper": number}
    return constants_table(summary).style.format(formats, na_rep="").hide(axis="index")


def claim_values(summary: SweepsSummary) -> dict[str, float]:
    """The measured values of the sweep claims (Omega rescaled to weight decay 1, as the paper's)."""
    params = summary.params
    return {
        "sweeps.omega_exponent": constant(summary.fit_omega, "exponent")[0],
        "sweeps.Omega": constant(summary.fit_p, "Omega")[0] * params.p_weight_decay,
        "sweeps.p_crit": constant(summary.fit_p, "p_crit")[0],
        "sweeps.r2_p": constant(summary.fit_p, "r2")[0],
    }


def claim_settings(params: SweepsParams) -> dict[str, str]:
    """Where this build's settings differ from the paper's, for the claims page."""
    sweep_settings = {k: getattr(params, k) for k in PAPER_SWEEPS}
    sweep_settings = {k: list(v) if isinstance(v, tuple) else v for k, v in sweep_settings.items()}
    return {
        **claims.deviations(sweep_settings, PAPER_SWEEPS),
        **claims.deviations(params.config(params.omega_max_epochs), SweepConfig(), ignore=["max_epochs"]),
    }


def format_number(x: float | None, digits: int = 3) -> str:
    """A number for the prose: ``digits`` significant digits, or 'n/a' when it could not be measured."""
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"


def format_steps(x: float | None) -> str:
    """A number of optimizer steps for the prose, rounded to a whole step; 'n/a' when unmeasured."""
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.0f}"


def _batch(batch_size: int | None) -> int | str:
    """A sweep's batch size for the prose: the number, or "full" (every training pair each step)."""
    return "full" if batch_size is None else int(batch_size)


def _trend(by_condition: pd.DataFrame) -> tuple[str, str, str, str]:
    """Mean delay at the first and last condition with grokked seeds."""
    grokked = by_condition.dropna(subset=["delay_mean"])
    if grokked.empty:
        return "n/a", "n/a", "n/a", "n/a"
    first, last = grokked["delay_mean"].iloc[0], grokked["delay_mean"].iloc[-1]
    return (f"{grokked.index[0]:g}", format_steps(first), f"{grokked.index[-1]:g}", format_steps(last))


def _trends(summary: SweepsSummary) -> dict[str, str]:
    """``w_first``, ``w_first_delay``, ``w_last``, ``w_last_delay`` and the same with ``p_``."""
    w_first, w_first_delay, w_last, w_last_delay = _trend(summary.summary_omega)
    p_first, p_first_delay, p_last, p_last_delay = _trend(summary.summary_p)
    return {
        "w_first": w_first,
        "w_first_delay": w_first_delay,
        "w_last": w_last,
        "w_last_delay": w_last_delay,
        "p_first": p_first,
        "p_first_delay": p_first_delay,
        "p_last": p_last,
        "p_last_delay": p_last_delay,
    }


def _settings_values(params: SweepsParams, paper: dict) -> dict[str, object]:
    n_train = int(params.train_fraction * params.omega_p**2)
    plan = batch_plan(n_train, params.omega_batch_size, params.config(1).keep_partial_batch)
    return {
        "n_seeds": params.n_seeds,
        "omega_p": params.omega_p,
        "d_model": params.d_model,
        "d_ff": params.d_ff,
        "omega_batch": _batch(params.omega_batch_size),
        "p_batch": _batch(params.p_batch_size),
        "p_omega": f"{params.p_weight_decay:g}",
        "threshold_pct": f"{100 * params.threshold:g}",
        "patience": params.patience_epochs,
        "n_boot": params.n_boot,
        "lr": f"{params.lr:g}",
        "dropout": f"{params.dropout:g}",
        "omegas_text": ", ".join(f"{w:g}" for w in params.omegas),
        "moduli_text": ", ".join(str(q) for q in params.moduli),
        "omega_cap": params.omega_max_epochs,
        "p_cap": params.p_max_epochs,
        "n_train_omega_p": n_train,
        "budget_omega_p": n_train - min_correct(n_train, params.threshold),
        **{f"paper_{k}": f"{v:g}" for k, v in paper.items()},
        "paper_product": f"{paper['Omega'] * paper['p_crit']:g}",
        **{k: plan[k] for k in ("steps_per_permutation", "skipped", "steps_per_epoch")},
    }


def _fit_values(summary: SweepsSummary) -> dict[str, object]:
    fit_omega, fit_p = summary.fit_omega, summary.fit_p
    beta, beta_sd = constant(fit_omega, "exponent")
    omega_big, omega_big_sd = constant(fit_p, "Omega")
    p_crit, p_crit_sd = constant(fit_p, "p_crit")
    product, product_sd = constant(fit_p, "Omega_p_crit")
    n_grokked = usable_delays(summary.table_omega).sum() + usable_delays(summary.table_p).sum()
    omega_at_1 = claim_values(summary)["sweeps.Omega"]
    return {
        "beta": format_number(beta),
        "beta_sd": format_number(beta_sd, 2),
        "r2_omega": format_number(constant(fit_omega, "r2")[0], 3),
        "Omega": format_steps(omega_big),
        "Omega_sd": format_steps(omega_big_sd),
        "p_crit": format_number(p_crit),
        "p_crit_sd": format_number(p_crit_sd, 2),
        "r2_p": format_number(constant(fit_p, "r2")[0], 3),
        "Omega_at_1": format_steps(omega_at_1),
        # how far Omega at weight decay 1 lies from the paper's, in % of the paper's (+: above it)
        "Omega_vs_paper_pct": format_number(100 * (omega_at_1 / summary.paper["Omega"] - 1), 2),
        "Omega_at_1_sd": format_steps(omega_big_sd * summary.params.p_weight_decay),
        "product_at_1": format_steps(product * summary.params.p_weight_decay),
        "product_at_1_sd": format_steps(product_sd * summary.params.p_weight_decay),
        "rel_Omega": format_number(100 * omega_big_sd / omega_big, 2),
        "rel_p_crit": format_number(100 * p_crit_sd / p_crit, 2),
        "rel_product": format_number(100 * product_sd / product, 2),
        "n_grokked": int(n_grokked),
        "n_runs": len(summary.table_omega) + len(summary.table_p),
    }


_RECORDED_NAMES = (  # the recorded sweeps' glue names: "rec_" and the name of the value in this build
    *("rec_beta", "rec_beta_sd", "rec_r2_omega", "rec_Omega_at_1", "rec_Omega_at_1_sd", "rec_p_crit"),
    *("rec_p_crit_sd", "rec_r2_p", "rec_product_at_1", "rec_product_at_1_sd", "rec_n_grokked", "rec_n_runs"),
    *("rec_rel_Omega", "rec_rel_product", "rec_Omega_vs_paper_pct"),
    *("rec_w_first", "rec_w_first_delay", "rec_w_last", "rec_w_last_delay"),
    *("rec_p_first", "rec_p_first_delay", "rec_p_last", "rec_p_last_delay"),
    *("rec_source", "rec_n_seeds", "rec_n_omegas", "rec_n_moduli", "rec_cap", "rec_precision", "rec_hours"),
    *("rec_n_timed", "rec_commit", "rec_exported", "rec_rederive", "rec_deviations"),
)


def recorded_glue_values(recorded: RecordedSweeps | None) -> dict[str, object]:
    """The glue values of the recorded paper-scale sweeps (``rec_*``): its fits, its trends and
    what it was (its source label, seeds, conditions, cap, precision, training hours, code commit, the command that
    re-derives one condition, its settings that differ from the paper's, "none" when none); "n/a"
    throughout when none is recorded.

    ``recorded`` is :func:`corelib.experiments.paper_scale.recorded_sweeps`'s result.
    """
    if recorded is None:
        return dict.fromkeys(_RECORDED_NAMES, "n/a")
    params, prov = recorded.params, recorded.provenance
    timed = [s for s in (prov.get("training_seconds") or {}).values() if s is not None]
    differ = claim_settings(params)
    run = {
        "source": recorded.source,
        "n_seeds": params.n_seeds,
        "n_omegas": len(params.omegas),
        "n_moduli": len(params.moduli),
        "cap": max(params.omega_max_epochs, params.p_max_epochs),
        "precision": prov.get("precision", "fp32"),
        "hours": format_number(sum(timed) / 3600, 2) if timed else "n/a",
        "n_timed": len(timed),
        "commit": (prov.get("code") or {}).get("commit") or "n/a",
        "exported": prov.get("exported", "n/a"),
        "rederive": prov.get("rederive", "n/a"),
        "deviations": "; ".join(f"{k}: {v}" for k, v in differ.items()) or "none",
    }
    values = {**_fit_values(recorded), **_trends(recorded), **run}
    return {name: values[name.removeprefix("rec_")] for name in _RECORDED_NAMES}


def glue_values(summary: SweepsSummary, recorded: RecordedSweeps | None = None) -> dict[str, object]:
    """Every value the chapter's prose quotes, by glue name (``recorded``: see
    :func:`recorded_glue_values`)."""
    styled = styled_constants_table(summary)
    return {
        **_settings_values(summary.params, summary.paper),
        **_fit_values(summary),
        **_trends(summary),
        "constants_table": styled,
        **recorded_glue_values(recorded),
    }
