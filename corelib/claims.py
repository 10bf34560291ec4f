"""The paper's quantitative claims, with tolerances, and what the chapters measured for them.

:data:`CLAIMS` is the registry: what is claimed, the paper's value (as printed, and as a number
where it gives one) and the **tolerance** our measurement must pass. This is the only place a
tolerance lives. It is the paper's bound where it states one, otherwise the spread of its
reported values across models or seeds, otherwise ±10 % of a single value; any other tolerance
says why in ``basis``. Our values are never typed: a chapter calls :func:`record` with what it
measured and the settings at which it differs from the paper (:func:`deviations`).

:func:`status` reads a record: ``reproduced`` (every number passes, at the paper's settings),
``differs`` (one fails, at the paper's settings), ``measured at reduced settings`` (other
settings, whatever the numbers: only the paper's settings can reproduce a claim) or ``not run in
this profile``. A measured value is a number, a list of numbers or a ``{label: number}`` mapping;
every number must pass. The book renders the tables with :mod:`acebook.claims_page`.

A chapter whose claims need the paper's scale (hours of training) also records the values of the
recorded paper-profile run (:mod:`corelib.recorded`) with ``source=`` naming that run; they are
kept beside the build's own values (``<chapter>.recorded.json``), and the claims page judges
those claims on the recorded run.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .results import json_files, load_json, results_root, save_json

__all__ = [
    "CLAIMS",
    "FINDINGS",
    "FINDING_STATUSES",
    "RECORDED_SUFFIX",
    "STATUSES",
    "Claim",
    "claim",
    "claims_dir",
    "deviations",
    "forget_recorded",
    "load_records",
    "record",
    "status",
]

RECORDED_SUFFIX = ".recorded"  # record file of the values a chapter read from a recorded run

STATUSES = ("reproduced", "differs", "measured at reduced settings", "not run in this profile")

_BOUND = "the paper's own bound"
_SPREAD = "the spread of the paper's reported values"
_TEN_PERCENT = "±10 % of the paper's single value"


@dataclass(frozen=True)
class Claim:
    """One quantitative claim of the paper.

    Attributes:
        id: stable identifier, ``<chapter-topic>.<quantity>``.
        chapter: the notebook that measures it (``notebooks/<chapter>.py``).
        text: what is claimed, in a few words.
        paper: the paper's value as the paper states it (display text).
        tolerance: the test applied to our value, as display text (e.g. ``≤ 0.25``).
        test: the same test as a function of one number.
        basis: where the tolerance comes from (the paper's bound, the spread of its values,
            ±10 % of its value) or, for anything else, why.
        value: the paper's number, where it states one (for figures and prose).
        kind: ``"claim"`` for a claim of the paper; ``"finding"`` for one of this book's own
            findings beyond the paper (:data:`FINDINGS`): ``paper`` then says what the paper
            proposes or leaves open, and ``test`` is the condition under which the finding holds.
    """

    id: str
    chapter: str
    text: str
    paper: str
    tolerance: str
    test: Callable[[float], bool]
    basis: str
    value: float | None = None
    kind: str = "claim"

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


def _below(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"< {x:g}", lambda v: v < x


def _between(lo: float, hi: float) -> tuple[str, Callable[[float], bool]]:
    return f"in [{lo:g}, {hi:g}]", lambda v: lo <= v <= hi


def _ten_percent(x: float) -> tuple[str, Callable[[float], bool]]:
    lo, hi = sorted((0.9 * x, 1.1 * x))
    return f"in [{lo:.4g}, {hi:.4g}]", lambda v: lo <= v <= hi


def _equal(x: float) -> tuple[str, Callable[[float], bool]]:
    return f"= {x:g}", lambda v: v == x


def _new_claim(
    id: str,
    chapter: str,
    text: str,
    paper: str,
    rule: tuple[str, Callable[[float], bool]],
    basis: str,
    value: float | None = None,
) -> Claim:
    """A :class:`Claim` whose tolerance ``rule`` is one of the helpers above (display text, test)."""
    return Claim(id, chapter, text, paper, rule[0], rule[1], basis, value)


# The chapters (notebooks/<name>.py) that measure the claims.
_MARKOV = "markov_chain"
_MODULAR = "modular_addition"
_INFLATION = "core_inflation"
_THEORY = "grokking_theory"
_SWEEPS = "grokking_sweeps"
_AGREEMENT = "subject_verb_agreement"
_NO_NUMBER = "the paper states this without a number; "

# A table, one claim per entry, its fields in reading order: not reformatted.
# fmt: off
CLAIMS: tuple[Claim, ...] = (
    # Markov chain (Figure 1, Tables A1-A3)
    _new_claim("markov.accuracy", _MARKOV, "test accuracy of each model (Bayes-optimal 0.75)", "0.748 (each model)",
       _between(0.7475, 0.7485),
       "the paper prints 0.748 for every model: the Bayes rule's accuracy on the reference's test set, "
       "which this book samples exactly; the interval is the printed precision", 0.748),
    _new_claim("markov.keep_accuracy", _MARKOV, "core-only accuracy of each model", "0.748 (each model)",
       _between(0.7475, 0.7485), "as for the full model: the printed precision of the paper's 0.748", 0.748),
    _new_claim("markov.remove_accuracy", _MARKOV, "core-removed accuracy of each model (chance 0.25)", "0.237–0.261",
       _between(0.237, 0.261), _SPREAD),
    _new_claim("markov.rank", _MARKOV, "core rank of each model (99.9 % energy)", "3", _equal(3),
               "the paper's value", 3),
    _new_claim("markov.weight_cosine", _MARKOV, "|cosine| of the flattened weights, each pair of models",
               "near zero",
       _at_most(0.10), _NO_NUMBER + "0.10 is a few times the cosine of two independent "
       "initialisations of this construction"),
    _new_claim("markov.overlap", _MARKOV, "projector overlap, each pair of cores",
               "0.02–0.04 (Table A2: 0.027–0.031)",
       _between(0.02, 0.04), "the range of the paper's text"),
    _new_claim("markov.angles", _MARKOV, "principal angles between cores, each pair (degrees)",
               "75–90 (Table A2: 76–89)",
       _between(75, 90), "the range of the paper's text"),
    _new_claim("markov.cca_top2", _MARKOV, "top-two canonical correlations, each pair", "0.999 (every pair)",
       _at_least(0.9985), "the paper prints 0.999 for all six; the bound is its printed precision", 0.999),
    _new_claim("markov.cca_third", _MARKOV, "third canonical correlation, each pair", "0.927–0.958 (Table A2)",
       _between(0.927, 0.958), _SPREAD),
    _new_claim("markov.cca_mean", _MARKOV, "mean canonical correlation, each pair", "0.975–0.985 (means of Table A2)",
       _between(0.975, 0.985), _SPREAD + " (the text rounds them to 'near 0.99')"),
    _new_claim("markov.spectrum_error", _MARKOV, "largest distance of core eigenvalues to {0.75 ± 0.25i, 0.5}",
       "≤ 0.02 (0.48–0.51 for 0.5)", _at_most(0.02), "the largest deviation in the paper's Table A3"),
    _new_claim("markov.r2_ratio", _MARKOV, "R²_core / R²_oracle of the fitted dynamics", "> 0.98",
               _above(0.98), _BOUND),
    # Modular addition (Figure 2)
    _new_claim("modular.grok_epoch", _MODULAR, "epoch at which every model has test accuracy ≥ 0.99", "800",
       _ten_percent(800), _TEN_PERCENT + " (snapshots every 100 epochs: only 800 passes)", 800),
    _new_claim("modular.core_settles", _MODULAR, "the core dimension stops falling at grokking: first epoch at "
       "which the mean core dimension is within 10 % of its smallest value, minus the grokking epoch", "coincident (0)",
       _between(-100, 100), _NO_NUMBER + "'coincident' read as within one of the paper's 100-epoch "
       "analysis intervals", 0),
    _new_claim("modular.keep_ratio", _MODULAR, "after grokking: core-only / baseline accuracy (worst snapshot)",
       "preserves baseline", _at_least(0.999),
       _NO_NUMBER + "the reference's sufficiency criterion (baseline − 0.001) at accuracy ≈ 1"),
    _new_claim("modular.remove_accuracy", _MODULAR, "after grokking: core-removed accuracy (worst snapshot)",
       "near chance", _at_most(2 / 53), _NO_NUMBER + "the reference's necessity criterion, 2/p = 0.038"),
    _new_claim("modular.unit_before", _MODULAR, "before grokking: share of eigenvalues near the unit circle",
       "scattered inside", _at_most(0.2), _NO_NUMBER + "a fifth or fewer near the circle"),
    _new_claim("modular.unit_after", _MODULAR, "after grokking: share of eigenvalues near the unit circle",
               "on the circle",
       _at_least(0.5), _NO_NUMBER + "at least half near the circle"),
    _new_claim("modular.modes_at_grok", _MODULAR, "rotational modes at grokking, each model", "more than 1",
       _at_least(2), _BOUND),
    # Core inflation (Figure 3)
    _new_claim("inflation.core_dim_grok", _INFLATION, "weight decay kept: core dimension at the branch epoch (900)",
       "≈ 15", _ten_percent(15), _TEN_PERCENT, 15),
    _new_claim("inflation.core_dim_end", _INFLATION, "weight decay kept: core dimension at the end (epoch 20 000)",
       "≈ 60", _ten_percent(60), _TEN_PERCENT, 60),
    _new_claim("inflation.sufficient_stable", _INFLATION, "weight decay kept: sufficient dimension, end / branch epoch",
       "stable", _between(0.9, 1.1), _NO_NUMBER + "'stable' read as within 10 %", 1),
    _new_claim("inflation.modes_end", _INFLATION, "weight decay kept: rotational modes at the end (max 26)", "≈ 26",
       _between(23.4, 26), _TEN_PERCENT + " (26 is the maximum)", 26),
    _new_claim("inflation.modes_sparse", _INFLATION, "weight decay removed: rotational modes, end / branch epoch",
       "stay sparse", _at_most(1.1), _NO_NUMBER + "'stayed sparse' read as at most 10 % more modes "
       "than at the branch", 1),
    _new_claim("inflation.arm_dim_gap", _INFLATION, "core dimension at the end, weight decay kept minus removed",
       "> 0 (≈ 60 vs compact)", _above(0), _BOUND),
    _new_claim("inflation.arm_mode_gap", _INFLATION, "rotational modes at the end, weight decay kept minus removed",
       "> 0 (≈ 26 vs sparse)", _above(0), _BOUND),
    # Grokking theory
    _new_claim("theory.psi_norm", _THEORY, "‖ψ‖² = 3p/4 for odd p: largest relative error", "exact",
               _at_most(1e-9),
       "an identity: floating-point rounding only"),
    # Grokking sweeps (Figure 4)
    _new_claim("sweeps.omega_exponent", _SWEEPS, "exponent of τ ∝ ω^β", "−1.02",
               _ten_percent(-1.02), _TEN_PERCENT, -1.02),
    _new_claim("sweeps.Omega", _SWEEPS, "optimizer constant Ω at ω = 1 (steps)", "≈ 2770", _ten_percent(2770),
       _TEN_PERCENT, 2770),
    _new_claim("sweeps.p_crit", _SWEEPS, "critical modulus p_crit", "≈ 23", _ten_percent(23), _TEN_PERCENT, 23),
    _new_claim("sweeps.r2_p", _SWEEPS, "R² of the ODE fit τ(p)", "> 0.99", _above(0.99), _BOUND),
    # Subject-verb agreement (Figure 5, Tables A5-A7)
    _new_claim("sva.rank", _AGREEMENT, "core rank at the chosen layer, each model", "1", _equal(1),
               "the paper's value", 1),
    _new_claim("sva.spectral_gap", _AGREEMENT, "spectral gap at the chosen layer in the paper's "
       "convention, (σ1/σ2)⁴, each model", "40 – 2.8e10 (Table A6)", _at_least(40),
       "the smallest of the paper's Table A6, which its code computes as (σ1/σ2)⁴ (the caption says "
       "σ1²/σ2²)"),
    _new_claim("sva.auc_baseline", _AGREEMENT, "agreement AUC, unmodified model", "0.808–0.934",
               _between(0.808, 0.934),
       _SPREAD),
    _new_claim("sva.auc_keep", _AGREEMENT, "agreement AUC, core only", "≥ 0.91", _at_least(0.91), _BOUND),
    _new_claim("sva.auc_remove", _AGREEMENT, "agreement AUC, core removed", "≤ 0.25", _at_most(0.25), _BOUND),
    _new_claim("sva.auc_flip", _AGREEMENT, "agreement AUC, core flipped", "≤ 0.10", _at_most(0.10), _BOUND),
    _new_claim("sva.pearson", _AGREEMENT, "Pearson r of core coordinates across model families", "0.62–0.94",
       _at_least(0.62), "the lower end of the paper's across-family range; a higher correlation is a "
       "closer alignment, so the upper end is not a test"),
    _new_claim("sva.spearman", _AGREEMENT, "Spearman ρ of core coordinates across model families", "0.59–0.93",
       _at_least(0.59), "the lower end of the paper's across-family range, as for Pearson r"),
    _new_claim("sva.key_is_base", _AGREEMENT, "'The key next to the cabinets': P(is), unmodified", "0.51",
       _ten_percent(0.51), _TEN_PERCENT, 0.51),
    _new_claim("sva.key_is_flip", _AGREEMENT, "'The key next to the cabinets': P(is), core flipped", "0.01",
       _ten_percent(0.01), _TEN_PERCENT, 0.01),
    _new_claim("sva.key_are_base", _AGREEMENT, "'The key next to the cabinets': P(are), unmodified", "0.06",
       _ten_percent(0.06), _TEN_PERCENT, 0.06),
    _new_claim("sva.key_are_flip", _AGREEMENT, "'The key next to the cabinets': P(are), core flipped", "0.71",
       _ten_percent(0.71), _TEN_PERCENT, 0.71),
    _new_claim("sva.steering_rate", _AGREEMENT, "share of agreement decisions inverted by adaptive steering (sampling)",
       "systematic", _at_least(0.5), _NO_NUMBER + "'systematic' read as at least half"),
    _new_claim("sva.steering_other_words", _AGREEMENT, "share of other number-marked words (has/have, does/do, "
       "this/these, it/they, its/their, ...) inverted by steering (sampling)", "effect generalised",
       _at_least(0.5), _NO_NUMBER + "read as at least half, as for the verbs"),
    _new_claim("sva.steering_untouched", _AGREEMENT, "share of generations without agreement decisions left unchanged",
       "untouched", _at_least(0.9), _NO_NUMBER + "'untouched' read as at least 90 %"),
)
"""Every quantitative claim of the paper that the book measures, in chapter order."""
# fmt: on


def _new_finding(
    id: str, chapter: str, text: str, paper: str, rule: tuple[str, Callable[[float], bool]], basis: str
) -> Claim:
    """One of the book's own findings: ``rule`` is the condition under which it holds."""
    return Claim(id, chapter, text, paper, rule[0], rule[1], basis, None, "finding")


_CLOCK = "inflation_clock"
_WINDOW = "interpretability_window"
_RANGES = "three seeds: holds only when the seed ranges do not overlap"

# fmt: off
FINDINGS: tuple[Claim, ...] = (
    _new_finding("modular.jacobians_exact", _MODULAR, "largest principal angle (degrees) between the core "
       "from the fewest Jacobians (16) and from every test activation, over seeds, two draws and three "
       "snapshots", "the paper samples 64 Jacobians, its reference code 1 000", _below(1e-6), "holds when "
       "the cores agree to rounding: after the last block the logits are the unembedding, a linear map, so "
       "every Jacobian is the same matrix"),
    _new_finding("markov.cca_third_rank4", _MARKOV, "the last canonical correlation of the energy-rank cores "
       "(the third, at rank 3) with one more direction kept: largest change over pairs", "not tested by the "
       "paper (the book's explanation of its third correlation)", _below(0.005), "holds when keeping the "
       "near-null next direction moves the third correlation by less than 0.005: that direction does not set it"),
    _new_finding("markov.cca_third_other_seeds", _MARKOV, "other sets of three models (the chapter's settings, "
       "other seeds): share of sets whose third canonical correlation lies inside the paper's range for every "
       "pair", "0.927–0.958 from the paper's one set of three (the book's explanation of its higher values: "
       "another draw of seeds)", _above(0), "holds when at least one other set lands inside the paper's range: "
       "the chapter's higher values are then within the spread between draws of seeds, as the explanation says"),
    _new_finding("markov.overlap_other_seeds", _MARKOV, "other sets of three models (the chapter's settings, "
       "other seeds): share of sets whose projector overlap lies inside the paper's range for every pair",
       "0.02–0.04 from the paper's one set of three", _above(0), "holds when at least one other set lands "
       "inside the paper's range: the chapter's wider spread is then within the spread between draws of seeds"),
    _new_finding("window.restart_grows", _WINDOW, "the control arm (weight decay kept, optimizer restarted at "
       "grokking) against the uninterrupted run: core dimension at the window's end, smallest restarted seed "
       "minus largest kept seed", "not considered by the paper (its removed arm also restarts AdamW)", _above(0),
       _RANGES + " (holds: restarting the optimizer alone leaves larger cores)"),
    _new_finding("window.anneal_smaller", _WINDOW, "weight decay annealed after grokking (both spans) against the "
       "restarted control: core dimension at the window's end, smallest control seed minus largest annealed seed",
       "annealing soon after grokking may keep the core compact (proposed, untested)", _above(0), _RANGES),
    _new_finding("window.anneal_larger", _WINDOW, "weight decay annealed after grokking (both spans) against the "
       "restarted control: core dimension at the window's end, smallest annealed seed minus largest control seed",
       "annealing soon after grokking may keep the core compact (proposed, untested)", _above(0), _RANGES),
    _new_finding("window.removed_smaller", _WINDOW, "weight decay removed at grokking against the restarted control: "
       "core dimension at the window's end, smallest control seed minus largest removed seed", "removing weight "
       "decay keeps cores compact (Figure 3A, on the paper's clock)", _above(0), _RANGES),
    _new_finding("clock.tau_collapse", _CLOCK, "core-dimension curves of runs at different lr x wd after grokking: "
       "spread against tau over spread against epochs", "the grokking theory's clock, 1 / (lr wd), applied to "
       "inflation (not tested by the paper)", _below(0.5), "holds when rescaling to tau at least halves the "
       "spread between the runs' curves"),
    _new_finding("clock.tau_separates", _CLOCK, "core-dimension curves of runs at different lr x wd after "
       "grokking: spread against tau over spread against epochs", "not tested by the paper", _above(1),
       "holds when the runs' curves lie further apart against tau than against epochs"),
    _new_finding("clock.smaller_at_equal_tau", _CLOCK, "every faster run at its end against the recorded paper "
       "run at the same tau: smallest core of the paper run's seeds minus largest of the run's, the least over "
       "runs", "not tested by the paper", _above(0), _RANGES + " (holds: every faster run ends with a smaller "
       "core than the paper run at the same tau)"),
    _new_finding("clock.smaller_at_equal_epochs", _CLOCK, "every faster run at its end against the recorded paper "
       "run at the same epoch: smallest core of the paper run's seeds minus largest of the run's, the least over "
       "runs", "not tested by the paper", _above(0), _RANGES + " (holds: every faster run ends with a smaller "
       "core than the paper run at the same epoch)"),
    # grokking sweeps: the modulus law near its critical modulus (record grokking_sweeps_moduli)
    _new_finding("sweeps.near_Omega_sd", _SWEEPS, "relative bootstrap sd of Ω with the moduli 23 and 29 added to "
       "the recorded modulus sweep, over without them", "not tested by the paper (the book's explanation of why Ω "
       "alone differs: the sweep's moduli lie far above p_crit)", _below(0.5), "holds when the moduli near p_crit "
       "at least halve Ω's relative spread: they pin Ω down apart from the product Ω p_crit"),
    _new_finding("sweeps.near_Omega", _SWEEPS, "optimizer constant Ω at ω = 1 (steps), fitted with the moduli 23 "
       "and 29 added", "≈ 2770", _ten_percent(2770), "holds within the paper's 10 %, as for sweeps.Omega"),
    # core inflation: the chapter's own explanations of its differences, tested (record core_inflation_questions)
    _new_finding("inflation.dropout_end_core", _INFLATION, "weight decay kept, paper's settings: mean core "
       "dimension at epoch 20 000 trained without dropout minus with dropout 0.1 (both trained on one machine)",
       "dropout not stated by the paper (the book's explanation of its smaller cores)", _above(0),
       "holds when the cores trained without dropout are larger, as the explanation predicts"),
    _new_finding("inflation.dropout_spikes", _INFLATION, "weight decay kept, paper's settings: training "
       "collapses per model after the branch, without dropout minus with dropout 0.1", "not reported by the "
       "paper (the book's candidate: dropout keeps the loss noisy)", _above(0),
       "holds when models trained without dropout collapse more often"),
    _new_finding("inflation.jacobians_count", _INFLATION, "core dimension at epoch 20 000 with 1 000 Jacobians "
       "(the reference code's) against 64 (the paper's): largest change of any seed, with and without dropout",
       "the paper samples 64 Jacobians, its reference code 1 000", _below(0.5),
       "holds when no seed's core dimension changes"),
    _new_finding("inflation.sufficient_loose_stable", _INFLATION, "weight decay kept, recorded settings: "
       "sufficient dimension at epoch 20 000 over at the branch, when the core may miss 5 % of the test pairs "
       "(tolerance 0.05 instead of 0.001)", "stable (the book's explanation: the strict test counts the last "
       "few pairs)", _between(0.9, 1.1), "holds when the looser test finds the sufficient dimension stable "
       "(within 10 %, as for the paper's claim)"),
    _new_finding("inflation.grok_core_seed_noise", _INFLATION, "core dimension at the branch (epoch 900), "
       "recorded run: two-sided p-value of the paper's 15 under a t-test of our three seeds", "≈ 15 (one run "
       "of three seeds, read off the paper's figure)", _at_least(0.05), "holds when seed noise alone could "
       "explain the difference (p ≥ 0.05)"),
    _new_finding("inflation.end_core_seed_noise", _INFLATION, "core dimension at the end (epoch 20 000), "
       "recorded run: two-sided p-value of the paper's 60 under a t-test of our three seeds", "≈ 60 (one run "
       "of three seeds, read off the paper's figure)", _at_least(0.05), "holds when seed noise alone could "
       "explain the difference (p ≥ 0.05)"),
    _new_finding("window.late_removal_deflates", _WINDOW, "weight decay removed late: mean core dimension at the "
       "late branch minus at the window's end", "not tested by the paper", _above(0),
       "holds when the mean core is smaller at the end than where the decay was removed"),
    # the window on the paper's own clock (lr 1e-3, wd 1, to epoch 20000), from its record
    _new_finding("window_paper.kept_inflates", _WINDOW, "paper's clock, weight decay kept: core dimension at "
       "the window's end (tau 60) against at grokking, smallest seed at the end minus largest at grokking",
       "cores inflate after grokking under weight decay (Figure 3A)", _above(0), _RANGES),
    _new_finding("window_paper.anneal_smaller", _WINDOW, "paper's clock, weight decay annealed after grokking "
       "(over tau 1.5 and 6) against kept: core dimension at the window's end, smallest kept seed minus largest "
       "annealed seed", "annealing soon after grokking may keep the core compact (proposed, untested)",
       _above(0), _RANGES),
    _new_finding("window_paper.anneal_near_grokking", _WINDOW, "paper's clock: each seed's growth of its core "
       "from its branch to the window's end, the largest of the annealed arms' seeds over the smallest of the kept "
       "run's", "annealing soon after grokking may keep the core compact (proposed, untested)", _below(0.5),
       "holds when every annealed seed grew less than half as much as every kept seed (does not hold when some "
       "kept seed did not grow)"),
    _new_finding("window_paper.removed_smaller", _WINDOW, "paper's clock, weight decay removed at grokking "
       "against kept: core dimension at the window's end, smallest kept seed minus largest removed seed",
       "removing weight decay keeps cores compact (Figure 3A)", _above(0), _RANGES),
    _new_finding("window_paper.restart_smaller", _WINDOW, "paper's clock, weight decay kept and the optimizer "
       "restarted at grokking, against the uninterrupted run: core dimension at the window's end, smallest "
       "uninterrupted seed minus largest restarted seed", "not considered by the paper (its removed arm also "
       "restarts AdamW)", _above(0), _RANGES),
    _new_finding("window_paper.late_removal_deflates", _WINDOW, "paper's clock, weight decay removed late "
       "in the window: core dimension at that branch against at the window's end, smallest seed at the branch "
       "minus largest at the end", "not tested by the paper", _above(0), _RANGES),
    _new_finding("window_paper.anneal_below_restart", _WINDOW, "paper's clock, weight decay annealed after "
       "grokking against kept with the optimizer restarted (the control that branches as the annealed arms do): "
       "core dimension at the window's end, smallest restarted seed minus largest annealed seed",
       "annealing soon after grokking may keep the core compact (proposed, untested)", _above(0), _RANGES),
    _new_finding("window_paper.removed_below_restart", _WINDOW, "paper's clock, weight decay removed at grokking "
       "against kept with the optimizer restarted: core dimension at the window's end, smallest restarted seed "
       "minus largest removed seed", "removing weight decay keeps cores compact (Figure 3A)", _above(0), _RANGES),
    _new_finding("window_paper.all_generalise", _WINDOW, "paper's clock: the lowest test accuracy of any "
       "model (any arm, any seed) at the window's end", "not tested by the paper", _at_least(0.99),
       "holds when every model still generalises (at least 99 % test accuracy)"),
    # own_model: a tense core in SmolLM2, and ACE beside the directions fitted to a label
    _new_finding("own.tense_flip_inverts", "own_model", "tense core flipped at the chosen layer: tense AUC on "
       "held-out prompts", "tense is not studied by the paper", _below(0.5),
       "holds when the flip inverts the preferred tense (AUC below one half)"),
    _new_finding("own.tense_keep_loses", "own_model", "tense core kept alone: unmodified tense AUC minus the AUC "
       "with only the core", "tense is not studied by the paper", _above(0.05),
       "holds when the core alone loses more than 0.05 of AUC: it is not sufficient for tense"),
    _new_finding("own.tense_remove_leaves", "own_model", "tense core removed: tense AUC minus one half",
       "tense is not studied by the paper", _above(0.05),
       "holds when more than 0.05 of AUC above chance is left without the core: it is not all of tense"),
    _new_finding("own.ace_keep_sufficient", "own_model", "agreement, ACE core kept alone at the chosen layer: AUC "
       "minus the unmodified model's, per model", "the core is sufficient (Table A5; the agreement chapter)",
       _at_least(0), "holds when, kept alone, the core separates the held-out prompts at least as well as the "
       "whole model, in every model"),
    _new_finding("own.ace_remove_largest", "own_model", "agreement: AUC with the mean difference, the probe or the "
       "top PC removed (the least) minus with the ACE core removed, per model", "ACE certifies causal relevance "
       "'by construction and intervention' (Appendix); no other direction is compared", _above(0),
       "holds when removing the core lowers the AUC more than removing any other direction, in every model"),
    _new_finding("own.ace_flip_largest", "own_model", "agreement: AUC with the mean difference, the probe or the "
       "top PC flipped (the least) minus with the ACE core flipped, per model", "ACE certifies causal relevance "
       "'by construction and intervention' (Appendix); no other direction is compared", _above(0),
       "holds when flipping the core lowers the AUC more than flipping any other direction, in every model"),
    _new_finding("own.md_closest", "own_model", "angle to the ACE core (degrees): the smaller of the probe's and "
       "the top PC's minus the mean difference's, per model", "not compared by the paper", _above(0),
       "holds when the mean difference is the direction closest to the core, in every model"),
    _new_finding("own.probe_reads_best", "own_model", "AUC of the projection for the label on held-out prompts: "
       "the probe's minus the best of the other three directions, per model", "not compared by the paper",
       _above(0), "holds when the probe reads the label best in every model; one draw of 150 held-out prompts, "
       "so differences under about 0.03 are within its sampling error"),
    _new_finding("own.probe_remove_share", "own_model", "probe's direction removed: its loss of AUC as a share of "
       "the ACE core's, per model", "not compared by the paper", _below(1),
       "holds when the model depends on the probe's direction less than on the core, in every model"),
    _new_finding("own.pc_remove_share", "own_model", "top principal component removed: its loss of AUC as a share "
       "of the ACE core's, per model", "high-variance directions are unlikely to align with a task in complex "
       "models (Appendix, 'When activity and relevance align')", _below(0.1),
       "holds when removing the direction of largest variance costs less than a tenth of what removing the "
       "core costs, in every model"),
    _new_finding("own.probe_reads_everywhere", "own_model", "probe's AUC for the label at its worst swept layer, "
       "per model", "not studied by the paper", _at_least(0.95),
       "holds when a probe reads the number at every swept layer with AUC at least 0.95"),
    _new_finding("own.early_flips_small", "own_model", "probe's direction or ACE core flipped at a layer in the "
       "first three quarters of the depth: the least AUC minus the unmodified model's, over layers and models",
       "not studied by the paper", _at_least(-0.05),
       "holds when no such flip lowers the AUC by more than 0.05"),
    _new_finding("own.strong_probe_is_md", "own_model", "probe with the grid's strongest penalty: angle to the "
       "mean difference (degrees), per model", "not studied by the paper", _at_most(5),
       "holds within 5 degrees: the mean difference is the probe's limit as the penalty grows"),
    _new_finding("own.weak_probe_not_used_more", "own_model", "AUC with the grid's weakest-penalty probe removed "
       "minus with its strongest-penalty probe removed, per model", "not studied by the paper", _at_least(0),
       "holds when the weaker penalty does not give a direction the model depends on more; one draw of 150 "
       "held-out prompts, so differences under about 0.03 are within its sampling error"),
)
"""The book's own findings beyond the paper, cited in prose as the claims are; no tolerance."""
# fmt: on

FINDING_STATUSES = ("holds", "does not hold", "not run in this profile")

_BY_ID = {c.id: c for c in CLAIMS + FINDINGS}
if len(_BY_ID) != len(CLAIMS) + len(FINDINGS):  # pragma: no cover - a typo in the registry above
    raise RuntimeError("duplicate claim ids in corelib.claims.CLAIMS and FINDINGS")


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
        raise TypeError(
            f"claim {claim_id!r}: a measured value must be a number, a list of numbers or a "
            f"{{label: number}} mapping, got {type(value).__name__}."
        )
    v = float(value)
    return int(v) if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(value.dtype)) else v


def deviations(ours: Any, paper: Any, *, ignore: Iterable[str] = ()) -> dict[str, str]:
    """The settings of ``ours`` that differ from ``paper``'s: ``{name: "ours (paper: theirs)"}``.

    ``ours`` and ``paper`` are dataclass instances of one type or mappings; fields in ``ignore``
    (settings that do not change what is measured, e.g. how often progress is recorded) are
    skipped, as are fields that only ``ours`` has. Passed to :func:`record`: an empty result means
    the chapter ran at the paper's settings.
    """

    def as_dict(x):
        return dataclasses.asdict(x) if dataclasses.is_dataclass(x) else dict(x)

    a, b = as_dict(ours), as_dict(paper)
    skip = set(ignore)

    def norm(v):
        return list(v) if isinstance(v, tuple) else v

    return {
        k: f"{_setting(a[k])} (paper: {_setting(b[k])})"
        for k in a
        if k in b and k not in skip and norm(a[k]) != norm(b[k])
    }


def _setting(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_setting(x) for x in v) + "]"
    return f"{v:g}" if isinstance(v, float) else str(v)


def record(
    chapter: str,
    values: Mapping[str, Any],
    *,
    settings: Mapping[str, str],
    notes: Mapping[str, str] | None = None,
    root: Path | str | None = None,
    source: str | None = None,
) -> None:
    """Save what ``chapter`` measured for its claims (``claims/<chapter>.json`` of the results
    folder; nothing is returned, so a chapter cell ending with this call shows nothing).

    ``values`` maps claim ids (see :data:`CLAIMS`) to measured values; an unknown id, or a claim
    of another chapter, is an error. ``settings`` lists the chapter's settings that differ from
    the paper's (:func:`deviations`; empty at the paper's settings): with any, the chapter's
    claims are ``measured at reduced settings``. ``notes`` adds a sentence per claim id. The
    runner's profile (environment variable ``ACE_PROFILE``, set by the book's runner) is stored
    with the values.

    ``source`` is None for what this build computed. For values read from a recorded run (see
    :mod:`corelib.recorded`) it names that run, e.g. ``"recorded paper-profile run (commit
    abc1234, 2026-11-25)"``; such values are saved in ``<chapter>.recorded.json``, beside the
    build's, with the recorded run's own settings.
    """
    _plain_name(chapter)
    notes = dict(notes or {})
    for cid in list(values) + list(notes):
        c = claim(cid)
        if c.chapter != chapter:
            raise ValueError(f"claim {cid!r} belongs to chapter {c.chapter!r}, not {chapter!r}.")
    bad = [k for k, v in dict(settings).items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise TypeError(f"settings must map names to text (see claims.deviations), got {bad}.")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise ValueError(f"source must name the recorded run in a few words, got {source!r}.")
    data = {
        "chapter": chapter,
        "source": source,
        "profile": os.environ.get("ACE_PROFILE", "interactive"),
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "values": {cid: _check_value(cid, v) for cid, v in values.items()},
        "settings": dict(settings),
        "notes": notes,
    }
    folder = claims_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    save_json(folder / f"{chapter}{'' if source is None else RECORDED_SUFFIX}.json", data)


def _plain_name(chapter: str) -> str:
    """A chapter's name is a plain word: it becomes a file name in the claims folder, so a path
    (which could write or delete a file elsewhere) is refused."""
    if not isinstance(chapter, str) or not re.fullmatch(r"[A-Za-z0-9_]+", chapter):
        raise ValueError(f"chapter must be a chapter's name (letters, digits, _), never a path; got {chapter!r}.")
    return chapter


def forget_recorded(chapter: str, root: Path | str | None = None) -> None:
    """Remove the values ``chapter`` read from a recorded run (when that record is gone)."""
    _plain_name(chapter)
    path = claims_dir(root) / f"{chapter}{RECORDED_SUFFIX}.json"
    if path.exists():
        path.unlink()


def load_records(root: Path | str | None = None, chapters: Iterable[str] | None = None) -> dict[str, dict]:
    """Every recorded chapter file, ``{name: data}`` (a file that cannot be read is an error).

    ``name`` is the chapter for what a build computed, and the chapter plus
    :data:`RECORDED_SUFFIX` for what it read from a recorded run. ``chapters`` limits the reading
    to those chapters' files (a chapter page shows its own rows without depending on the records
    of chapters not yet rerun).
    """
    out = {}
    folder = claims_dir(root)
    paths = json_files(folder)
    if chapters is not None:
        paths = [path for path in paths if path.stem.removesuffix(RECORDED_SUFFIX) in set(chapters)]
    for path in paths:
        data = load_json(path)  # verified: a damaged record names itself and the fix
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("values"), dict)
            or not isinstance(data.get("settings"), dict)
        ):
            raise ValueError(
                f"{path} is not a claims record of this version of corelib (no 'values' and "
                f"'settings'); rerun chapter {path.stem.removesuffix(RECORDED_SUFFIX)!r}."
            )
        unknown = [cid for cid in data["values"] if cid not in _BY_ID]
        if unknown:
            raise ValueError(
                f"{path} records unknown claims {unknown}; rerun chapter {path.stem.removesuffix(RECORDED_SUFFIX)!r} "
                "with this version of corelib."
            )
        out[path.stem] = data
    return out


def status(c: Claim, data: Mapping[str, Any]) -> tuple[str, bool | None]:
    """The status of claim ``c`` given its chapter's record ``data`` (one of :data:`STATUSES`),
    and whether the measured value is within tolerance (None when nothing was measured).

    An empty value (e.g. ``{}``: one model, no pair to compare) counts as not measured.
    """
    values = data.get("values", {})
    if c.id not in values or not _numbers(values[c.id]):
        return "not run in this profile", None
    within = c.holds(values[c.id])
    if c.kind == "finding":  # the book's own: it holds or not, at the settings it was measured at
        return ("holds" if within else "does not hold"), within
    if data.get("settings"):
        return "measured at reduced settings", within
    return ("reproduced" if within else "differs"), within
