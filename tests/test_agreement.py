"""A re-derivation is compared with its record at the level the claims are made: per-seed values
may move within the rounding envelope, seed means within two standard errors of their difference; beyond it
is refused, naming the quantity (corelib/agreement.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from corelib import agreement

# Issue 33: condition "p=53 wd=3 B=512" of the recorded sweeps (Intel Xeon), re-derived on an AMD EPYC.
DELAYS = [(437, 444), (410, 409), (472, 478), (335, 343), (339, 314), (495, 498), (484, 490), (630, 572),
          (504, 489), (517, 527), (379, 394), (394, 397)]  # fmt: skip
T_MEM = [(398, 396), (377, 378), (370, 366), (409, 408), (352, 373), (380, 380), (367, 365), (369, 370),
         (404, 414), (361, 362), (412, 405), (390, 390)]  # fmt: skip


def _seed_records(column):
    return [
        [{"seed": s, "delay": d[column], "t_mem": m[column]} for s, (d, m) in enumerate(zip(DELAYS, T_MEM))],
    ][0]


def _sweep_agreement(recorded, rederived):
    fields = ("delay", "t_mem")
    return agreement.compare(
        recorded,
        rederived,
        agreement.seed_record_groups(recorded, fields, "p=53 wd=3 B=512"),
        agreement.seed_record_groups(rederived, fields, "p=53 wd=3 B=512"),
    )


def test_the_amd_re_derivation_of_a_sweep_condition_agrees_though_no_seed_is_identical():
    result = _sweep_agreement(_seed_records(0), _seed_records(1))
    assert not result.identical and len(result.differences) == 22  # every moved delay and t_mem
    assert result.agrees and result.n_moved == 2
    delay = next(q for q in result.quantities if q.name.endswith("delay"))
    assert delay.recorded.mean() == pytest.approx(449.67, abs=0.01)
    assert delay.rederived.mean() == pytest.approx(446.25, abs=0.01)
    recorded_var = np.var([d for d, _ in DELAYS], ddof=1) / 12
    rederived_var = np.var([d for _, d in DELAYS], ddof=1) / 12
    assert delay.seed_error == pytest.approx(np.sqrt(recorded_var + rederived_var))  # of the difference (Welch)
    assert 30 < delay.seed_error < 40 and abs(delay.t) < 0.2 and delay.p > 0.8


def test_a_mean_three_seed_errors_away_is_refused_naming_it():
    recorded = _seed_records(0)
    error = np.std([d for d, _ in DELAYS], ddof=1) / np.sqrt(12)
    shifted = [{**r, "delay": r["delay"] + 3 * error} for r in recorded]
    result = _sweep_agreement(recorded, shifted)
    assert not result.agrees
    assert [q.name for q in result.beyond] == ["p=53 wd=3 B=512 · delay"]
    assert result.largest_z == pytest.approx(3.0 / np.sqrt(2))  # both samples' spread: sqrt(2) recorded errors


def _snapshots(core_dims, test_acc=0.98):
    return [
        {"epoch": 1000, "models": [{"core_dim": d, "test_acc": test_acc + 0.001 * i, "modes": [1, 2]}
                                   for i, d in enumerate(core_dims)]},
    ]  # fmt: skip


def _snapshot_agreement(recorded, rederived):
    return agreement.compare(
        recorded, rederived, agreement.snapshot_groups(recorded, "wd"), agreement.snapshot_groups(rederived, "wd")
    )


def test_a_record_perturbed_at_rounding_level_is_accepted_and_not_called_identical():
    recorded = _snapshots([13, 13, 13])
    perturbed = copy.deepcopy(recorded)
    perturbed[0]["models"][1]["core_dim"] = 14  # a rank crossing its threshold in one seed
    for model in perturbed[0]["models"]:
        model["test_acc"] += 3e-6  # an accuracy moved by a last-bit change of one prediction's logits
    result = _snapshot_agreement(recorded, perturbed)
    assert result.agrees and not result.identical
    names = {q.name for q in result.quantities}
    assert names == {"wd · epoch 1000 · core_dim", "wd · epoch 1000 · test_acc", "wd · epoch 1000 · mode count"}
    assert _snapshot_agreement(recorded, copy.deepcopy(recorded)).identical


def test_one_test_pair_moved_in_one_seed_where_the_record_has_no_spread_agrees():
    """The AMD re-derivation of the core-inflation sample: at epoch 100 all three recorded seeds keep
    no test pair with the core alone; re-derived, one seed keeps one of 1405. The record's spread is 0,
    the re-derivation's is not: the difference is within two standard errors of the difference."""
    recorded = [{"epoch": 100, "models": [{"keep_acc": 0.0} for _ in range(3)]}]
    rederived = [{"epoch": 100, "models": [{"keep_acc": a} for a in (0.0, 1 / 1405, 0.0)]}]
    result = _snapshot_agreement(recorded, rederived)
    (keep,) = result.quantities
    assert result.agrees and not result.identical
    assert keep.seed_error == pytest.approx(np.std([0, 1 / 1405, 0], ddof=1) / np.sqrt(3))
    assert keep.difference == pytest.approx(1 / 1405 / 3) and keep.allowed == pytest.approx(2 * keep.seed_error)


def test_a_record_of_one_seed_is_held_to_the_rounding_envelope_whatever_the_other_side_spreads():
    recorded = [{"epoch": 100, "models": [{"keep_acc": 0.5}]}]
    rederived = [{"epoch": 100, "models": [{"keep_acc": a} for a in (0.2, 0.5, 0.8, 0.9)]}]
    (q,) = _snapshot_agreement(recorded, rederived).quantities
    assert q.seed_error == 0 and q.allowed == agreement.FLOAT_ENVELOPE and not q.agrees


def test_every_seed_moved_the_same_way_with_no_spread_on_either_side_is_refused():
    recorded = [{"epoch": 100, "models": [{"keep_acc": 0.0} for _ in range(3)]}]
    rederived = [{"epoch": 100, "models": [{"keep_acc": 0.01} for _ in range(3)]}]
    result = _snapshot_agreement(recorded, rederived)
    assert not result.agrees and [q.name for q in result.beyond] == ["wd · epoch 100 · keep_acc"]


def test_a_rank_off_by_three_in_every_seed_is_refused_naming_it():
    result = _snapshot_agreement(_snapshots([13, 14, 12]), _snapshots([16, 17, 15]))
    assert not result.agrees
    assert [q.name for q in result.beyond] == ["wd · epoch 1000 · core_dim"]


def test_a_quantity_missing_on_one_side_never_agrees():
    recorded = _snapshots([13, 13, 13])
    fewer = copy.deepcopy(recorded)
    for model in fewer[0]["models"]:
        del model["test_acc"]
    result = _snapshot_agreement(recorded, fewer)
    assert not result.agrees and [q.name for q in result.beyond] == ["wd · epoch 1000 · test_acc"]


def test_values_that_moved_in_their_last_bits_compare_without_a_warning():
    """scipy warns of cancellation on near-constant samples; verify's output stays clean."""
    import warnings

    recorded = [{"x": 0.5}, {"x": 0.5 + 4e-16}, {"x": 0.5}]
    rederived = [{"x": 0.5 + 2e-16}, {"x": 0.5}, {"x": 0.5}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = agreement.compare(
            recorded, rederived, agreement.seed_record_groups(recorded, ("x",)),
            agreement.seed_record_groups(rederived, ("x",)), tolerance=0.0,
        )  # fmt: skip
    assert result.agrees and not result.identical and result.quantities[0].p > 0.5
