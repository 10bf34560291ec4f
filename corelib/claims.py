"""The paper's quantitative claims, and what this build measured for each of them.

The book's claims page puts every number the paper states next to the value a chapter measured.
Two halves meet here:

- :data:`CLAIMS` is the registry of the paper's claims: what is claimed, the paper's value as the
  paper prints it, and the **tolerance**, a test on our measurement that decides whether the
  claim is reproduced. The paper's values are facts about the paper, typed once here; our values
  are never typed, they come from executing the chapters.
- :func:`record` is called by a chapter with the values it measured (one entry per claim id);
  it writes ``<results root>/claims/<chapter>.json``. :func:`claims_table` joins the registry with
  every recorded file into the table the claims page shows, with a status per claim:
  ``reproduced``, ``differs`` or ``not run in this profile``.

A measured value is a number, a list of numbers (one per model or pair: every one must pass)
or a mapping ``{label: number}`` (likewise). A chapter may attach a note to a claim (e.g. "this
build ran 4 000 of the paper's 20 000 epochs"), shown next to a claim that differs.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from .results import load_json, results_root, save_json

__all__ = ["Claim", "CLAIMS", "STATUSES", "claims_dir", "claim", "record", "load_records", "claims_table"]

STATUSES = ("reproduced", "differs", "not run in this profile")


@dataclass(frozen=True)
class Claim:
    """One quantitative claim of the paper.

    Attributes:
        id: stable identifier, ``<chapter-topic>.<quantity>``.
        chapter: the notebook that measures it (``notebooks/<chapter>.py``).
        text: what is claimed, in a few words.
        paper: the paper's value as the paper states it (display text).
        tolerance: the test applied to our value, as display text (e.g. ``≤ 0.30``).
        test: the same test as a function of one number.
        note: why our value may differ, when that is known in advance (else empty).
    """

    id: str
    chapter: str
    text: str
    paper: str
    tolerance: str
    test: Callable[[float], bool]
    note: str = ""

    def holds(self, value: Any) -> bool:
        """Whether every number in ``value`` passes the test (NaN or None never passes)."""
        numbers = _numbers(value)
        return bool(numbers) and all(v is not None and math.isfinite(v) and self.test(v) for v in numbers)


def _at_most(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"≤ {x:g}", lambda v: v <= x


def _at_least(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"≥ {x:g}", lambda v: v >= x


def _above(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"> {x:g}", lambda v: v > x


def _between(lo: float, hi: float) -> tuple[str, Callable[[float], bool]]:
    return f"in [{lo:g}, {hi:g}]", lambda v: lo <= v <= hi


def _within(target: float, tol: float) -> tuple[str, Callable[[float], bool]]:
    return f"{target:g} ± {tol:g}", lambda v: abs(v - target) <= tol


def _equal(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"= {x:g}", lambda v: v == x


def _c(id: str, chapter: str, text: str, paper: str, rule: tuple[str, Callable[[float], bool]],
       note: str = "") -> Claim:
    return Claim(id, chapter, text, paper, rule[0], rule[1], note)


_M, _A, _I, _T, _S, _L = ("markov_chain", "modular_addition", "core_inflation", "grokking_theory",
                          "grokking_sweeps", "subject_verb_agreement")

CLAIMS: tuple[Claim, ...] = (
    # Markov chain (Figure 1, Tables A1-A3)
    _c("markov.accuracy", _M, "test accuracy of each model (Bayes-optimal 0.75)", "0.748", _within(0.75, 0.01)),
    _c("markov.keep_accuracy", _M, "core-only accuracy of each model", "0.748", _within(0.75, 0.01)),
    _c("markov.remove_accuracy", _M, "core-removed accuracy of each model (chance 0.25)", "0.237–0.261",
       _at_most(0.30)),
    _c("markov.rank", _M, "core rank of each model (99.9 % energy)", "3", _equal(3)),
    _c("markov.weight_cosine", _M, "cosine of the flattened weights, each pair of models", "near zero",
       _at_most(0.10),
       "the flattened vector includes the LayerNorm gains, initialised at 1 and similar in every model; "
       "the learned matrices themselves are near-orthogonal (Figure 1A of the Markov chapter)"),
    _c("markov.overlap", _M, "projector overlap, each pair of cores", "0.027–0.031", _at_most(0.10)),
    _c("markov.angles", _M, "principal angles between cores, each pair (degrees)", "76–89", _between(60, 90)),
    _c("markov.cca_top2", _M, "top-two canonical correlations, each pair", "0.999", _at_least(0.95)),
    _c("markov.cca_mean", _M, "mean canonical correlation, each pair", "≈ 0.99", _at_least(0.95)),
    _c("markov.spectrum_error", _M, "largest distance of core eigenvalues to {0.75 ± 0.25i, 0.5}",
       "≤ 0.02 (0.48–0.51 for 0.5)", _at_most(0.05)),
    _c("markov.r2_ratio", _M, "R²_core / R²_oracle of the fitted dynamics", "> 0.98", _at_least(0.98)),
    # Modular addition (Figure 2)
    _c("modular.grok_epoch", _A, "epoch at which every model has test accuracy ≥ 0.99", "800",
       _between(300, 2000)),
    _c("modular.keep_ratio", _A, "after grokking: core-only / baseline accuracy (worst snapshot)", "≈ 1",
       _at_least(0.99)),
    _c("modular.remove_accuracy", _A, "after grokking: core-removed accuracy (worst snapshot; 2/p = 0.038)",
       "near chance", _at_most(2 / 53 + 0.02)),
    _c("modular.unit_before", _A, "before grokking: share of eigenvalues near the unit circle",
       "scattered inside", _at_most(0.2)),
    _c("modular.unit_after", _A, "after grokking: share of eigenvalues near the unit circle", "on the circle",
       _at_least(0.5)),
    _c("modular.modes_at_grok", _A, "rotational modes at grokking, each model", "more than 1", _at_least(2)),
    # Core inflation (Figure 3)
    _c("inflation.core_dim_growth", _I, "weight decay kept: core dimension, end / branch epoch",
       "≈ 4 (15 → 60)", _at_least(2.0)),
    _c("inflation.modes_end", _I, "weight decay kept: rotational modes at the end (max 26)", "≈ 26",
       _at_least(20)),
    _c("inflation.arm_dim_gap", _I, "core dimension at the end, weight decay kept minus removed",
       "> 0 (≈ 60 vs compact)", _above(0)),
    _c("inflation.arm_mode_gap", _I, "rotational modes at the end, weight decay kept minus removed",
       "> 0 (≈ 26 vs sparse)", _above(0)),
    # Grokking theory
    _c("theory.psi_norm", _T, "‖ψ‖² = 3p/4 for odd p: largest relative error", "exact", _at_most(1e-9)),
    # Grokking sweeps (Figure 4)
    _c("sweeps.omega_exponent", _S, "exponent of τ ∝ ω^β", "−1.02", _between(-1.3, -0.7)),
    _c("sweeps.Omega", _S, "optimizer constant Ω at ω = 1 (steps)", "≈ 2770", _between(2770 / 2, 2770 * 2),
       "Ω absorbs the optimizer and the step count per epoch; within a factor 2 counts as reproduced"),
    _c("sweeps.p_crit", _S, "critical modulus p_crit", "≈ 23", _between(10, 31)),
    _c("sweeps.r2_p", _S, "R² of the ODE fit τ(p)", "> 0.99", _at_least(0.95)),
    # Subject-verb agreement (Figure 5, Tables A5-A7)
    _c("sva.rank", _L, "core rank at the chosen layer, each model", "1", _equal(1)),
    _c("sva.spectral_gap", _L, "spectral gap (σ1/σ2)² at the chosen layer, each model", "40 – 2.8e10",
       _at_least(10)),
    _c("sva.auc_baseline", _L, "agreement AUC, unmodified model", "0.81–0.93", _at_least(0.8)),
    _c("sva.auc_keep", _L, "agreement AUC, core only", "≥ 0.91", _at_least(0.9)),
    _c("sva.auc_remove", _L, "agreement AUC, core removed", "≤ 0.25", _at_most(0.35)),
    _c("sva.auc_flip", _L, "agreement AUC, core flipped", "≤ 0.10", _at_most(0.15)),
    _c("sva.pearson", _L, "Pearson r of core coordinates across model families", "0.62–0.94", _at_least(0.6)),
    _c("sva.spearman", _L, "Spearman ρ of core coordinates across model families", "0.59–0.93",
       _at_least(0.55)),
    _c("sva.steering_rate", _L, "share of agreement verbs inverted by adaptive steering", "systematic",
       _at_least(0.5)),
    _c("sva.steering_untouched", _L, "share of generations without agreement decisions left unchanged",
       "untouched", _at_least(0.9)),
)
"""Every quantitative claim of the paper that the book measures, in chapter order."""

_BY_ID = {c.id: c for c in CLAIMS}
if len(_BY_ID) != len(CLAIMS):  # pragma: no cover - a typo in the registry above
    raise RuntimeError("duplicate claim ids in corelib.claims.CLAIMS")


def claim(claim_id: str) -> Claim:
    """The registered claim ``claim_id``; a clear error lists the known ids of its chapter."""
    try:
        return _BY_ID[claim_id]
    except KeyError:
        prefix = claim_id.split(".")[0]
        known = [c.id for c in CLAIMS if c.id.startswith(prefix + ".")] or [c.id for c in CLAIMS]
        raise KeyError(f"unknown claim {claim_id!r}; known claims: {', '.join(known)}") from None


def claims_dir(root: Path | str | None = None) -> Path:
    """Folder of the recorded claims: ``<results root>/claims``."""
    return Path(root) if root is not None else results_root() / "claims"


def _numbers(value: Any) -> list[float | None]:
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [None if v is None else float(v) for v in value]
    return [None if value is None else float(value)]


def _check_value(claim_id: str, value: Any) -> Any:
    """Plain JSON value (numbers, lists, {label: number}); raise on anything else."""
    if isinstance(value, Mapping):
        return {str(k): _check_value(claim_id, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_check_value(claim_id, v) for v in value]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"claim {claim_id!r}: a measured value must be a number, a list of numbers or a "
                        f"{{label: number}} mapping, got {type(value).__name__}.")
    v = float(value)
    return int(v) if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(value.dtype)) else v


def record(chapter: str, values: Mapping[str, Any], *, notes: Mapping[str, str] | None = None,
           root: Path | str | None = None) -> Path:
    """Save what ``chapter`` measured for its claims; returns the file written.

    ``values`` maps claim ids (see :data:`CLAIMS`) to measured values; an unknown id, or a claim
    of another chapter, is an error. ``notes`` adds a sentence per claim id, shown when the
    claim differs. The runner's profile (environment variable ``ACE_PROFILE``, set by
    ``corelib.runner``) is stored with the values.
    """
    notes = dict(notes or {})
    for cid in list(values) + list(notes):
        c = claim(cid)
        if c.chapter != chapter:
            raise ValueError(f"claim {cid!r} belongs to chapter {c.chapter!r}, not {chapter!r}.")
    data = {
        "chapter": chapter,
        "profile": os.environ.get("ACE_PROFILE", "interactive"),
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "values": {cid: _check_value(cid, v) for cid, v in values.items()},
        "notes": notes,
    }
    folder = claims_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{chapter}.json"
    save_json(path, data)
    return path


def load_records(root: Path | str | None = None) -> dict[str, dict]:
    """Every recorded chapter file, ``{chapter: data}`` (a file that cannot be read is an error)."""
    out = {}
    for path in sorted(claims_dir(root).glob("*.json")):
        try:
            data = load_json(path)
        except ValueError as err:
            raise ValueError(f"{path} is not valid JSON ({err}); rerun chapter {path.stem!r}.") from None
        unknown = [cid for cid in data.get("values", {}) if cid not in _BY_ID]
        if unknown:
            raise ValueError(f"{path} records unknown claims {unknown}; rerun chapter {path.stem!r} "
                             "with this version of corelib.")
        out[data.get("chapter", path.stem)] = data
    return out


def _display(value: Any) -> str:
    def one(v):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "n/a"
        if isinstance(v, int) or float(v).is_integer() and abs(v) < 1e6:
            return f"{int(v)}"
        return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"

    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {one(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        nums = [v for v in value if v is not None]
        if len(nums) > 1 and len(set(nums)) > 1:
            return f"{one(min(nums))} – {one(max(nums))} ({len(value)} values)"
        return one(nums[0]) if nums else "n/a"
    return one(value)


def claims_table(records: Mapping[str, dict] | None = None) -> list[dict]:
    """One row per registered claim: paper value, our value, tolerance, status, profile, note.

    ``records`` defaults to :func:`load_records`. A claim no chapter recorded is ``not run in
    this profile``; a recorded one is ``reproduced`` when every measured number passes its
    tolerance and ``differs`` otherwise, with the chapter's note (or the registry's) explaining why
    when known.
    """
    records = load_records() if records is None else records
    rows = []
    for c in CLAIMS:
        data = records.get(c.chapter, {})
        values = data.get("values", {})
        if c.id in values:
            value = values[c.id]
            status = "reproduced" if c.holds(value) else "differs"
            ours = _display(value)
        else:
            status, ours = "not run in this profile", "—"
        note = data.get("notes", {}).get(c.id) or c.note
        rows.append({"id": c.id, "chapter": c.chapter, "claim": c.text, "paper": c.paper, "ours": ours,
                     "tolerance": c.tolerance, "status": status,
                     "profile": data.get("profile", "—") if c.id in values else "—",
                     "note": note if status == "differs" else ""})
    return rows
