"""The exercises of the chapter "Modular addition": their solutions (``book/solutions/modular_addition.md``)
pass their checks, and the checks reject typical wrong answers with a message that says what is wrong."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from exercise_support import run_solution


def _ex():
    from corelib.exercises import modular_addition

    return modular_addition


def test_the_rotational_modes_solution_passes_and_matches_the_library(capsys):
    from corelib import operators

    ns = run_solution("modular_addition", "ex-modular-count")
    fn = ns["rotational_modes"]
    assert _ex().check_rotational_modes(fn) is True
    assert "all 9 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(0)
    for p in (5, 31, 53, 60):
        eig = rng.normal(size=40) + 1j * rng.normal(size=40)
        eig = np.concatenate([eig / np.abs(eig) * rng.uniform(0.9, 1.1, 40), eig])
        assert fn(eig, p).tolist() == operators.rotational_modes(eig, p).tolist()


def test_the_solution_counts_the_modes_of_the_records_at_grokking():
    ns = run_solution("modular_addition", "ex-modular-count")
    p = 53

    def model(freqs):
        eig = [np.exp(s * 2j * np.pi * k / p) for k in freqs for s in (1, -1)] + [0.3]
        return {"eigenvalues": [[z.real, z.imag] for z in eig]}

    records = [
        {"epoch": 600, "models": [model([1, 2]), model([]), model([])]},
        {"epoch": 800, "models": [model([1, 2, 3]), model([5, 6, 7, 8]), model([9])]},
    ]
    summary = SimpleNamespace(phases={"at": [600, 800, 800]})  # the part of an EmergenceSummary it reads
    assert ns["modes_at_grokking"](records, summary, p) == [2, 4, 1]


def _modes_with(*, band=True, fold=True, drop_zero=True, rnd=np.rint):
    def wrong(eig, p):
        return _ex()._variant(eig, p, band=band, fold=fold, drop_zero=drop_zero, rnd=rnd).astype(int)

    return wrong


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_modes_with(fold=False), "fold bin k onto p - k"),
        (_modes_with(drop_zero=False), "drop bin 0"),
        (_modes_with(band=False), r"keep only eigenvalues near the unit circle"),
        (_modes_with(rnd=np.floor), "round the angle to the nearest bin"),
        (lambda eig, p: len(_modes_with()(eig, p)), "not how many there are"),
    ],
)
def test_the_rotational_modes_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        _ex().check_rotational_modes(wrong)


def test_the_grokking_epoch_solution_passes_and_matches_the_library(capsys):
    from corelib.experiments import modular_runs

    fn = run_solution("modular_addition", "ex-modular-grok")["grokking_epoch"]
    assert _ex().check_grokking_epoch(fn) is True
    assert "all 8 cases pass" in capsys.readouterr().out
    acc = np.random.default_rng(1).uniform(0.95, 1.0, size=(12, 3))
    epochs = np.arange(0, 1200, 100)
    records = [{"epoch": int(e), "models": [{"test_acc": a} for a in row]} for e, row in zip(epochs, acc)]
    assert fn(epochs, acc) == modular_runs.grokking_epoch(records)


def _first(epochs, ok):
    hits = np.flatnonzero(ok)
    return int(epochs[hits[0]]) if hits.size else None


def _latest_first_crossing(epochs, acc, t=0.99):
    per_model = [_first(epochs, acc[:, i] >= t) for i in range(acc.shape[1])]
    return None if None in per_model else max(per_model)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda e, a, t=0.99: _first(e, a.mean(axis=1) >= t), "not their mean"),
        (_latest_first_crossing, "all models are above it at once"),
        (lambda e, a, t=0.99: _first(e, (a > t).all(axis=1)), r"use >=, not >"),
        (lambda e, a, t=0.99: _first(np.arange(len(e)), (a >= t).all(axis=1)), "not its position"),
        (lambda e, a, t=0.99: _first(e, (a >= t).all(axis=1)) or 0, "return None"),
    ],
)
def test_the_grokking_epoch_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        _ex().check_grokking_epoch(wrong)


def test_the_stubs_are_reported_as_not_done_yet(capsys):
    def stub(*args):
        raise NotImplementedError

    assert _ex().check_rotational_modes(stub) is False
    assert _ex().check_grokking_epoch(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 2


def test_the_planted_clock_solution_names_one_mode():
    ns = run_solution("modular_addition", "ex-modular-modes")
    assert ns["planted_modes"]().tolist() == [3]
    assert ns["planted_modes"](freqs=(3, 7)).tolist() == [3, 7]
