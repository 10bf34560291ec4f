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
        (lambda eig, p: len(_modes_with()(eig, p)), "not a single number"),
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
    assert _ex().check_shift_operator(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 3


def test_the_planted_clock_solution_names_one_mode():
    ns = run_solution("modular_addition", "ex-modular-modes")
    assert ns["planted_modes"]().tolist() == [3]
    assert ns["planted_modes"](freqs=(3, 7)).tolist() == [3, 7]


def test_the_shift_operator_solution_passes_and_matches_the_library(capsys):
    from corelib import operators

    ns = run_solution("modular_addition", "ex-modular-shift")
    fn = ns["shift_operator"]
    assert _ex().check_shift_operator(fn) is True
    assert "all 8 cases pass" in capsys.readouterr().out
    assert np.allclose(np.abs(ns["eigenvalues"]), 1) and np.allclose(np.sort(ns["steps"]), [-3, 3])
    rng = np.random.default_rng(5)
    for p, k in ((7, 2), (29, 6), (53, 10)):  # beyond the check's cases: the same spectrum as the library's
        r = rng.standard_normal((p, k))
        r -= r.mean(axis=0)
        ours = np.sort_complex(np.linalg.eigvals(fn(r)))
        assert np.allclose(ours, np.sort_complex(operators.fit_shift_operator(r, rel_tol=0).eigenvalues))


def _lstsq(x, y):
    return np.linalg.lstsq(x, y, rcond=None)[0]


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda r: _lstsq(r, np.roll(r, -1, axis=0)), "you returned the transpose of A"),
        (lambda r: _lstsq(r, np.roll(r, 1, axis=0)).T, "maps class c to class c - 1"),
        (lambda r: _lstsq(r[:-1], r[1:]).T, "left out the step from class p - 1 back to class 0"),
        (lambda r: _lstsq(r, np.roll(r, -1)).T, "without axis=0"),
        (lambda r: np.linalg.eigvals(_lstsq(r, np.roll(r, -1, axis=0)).T), "not a vector"),
        (lambda r: np.roll(r, -1, axis=0) @ np.linalg.pinv(r), r"it is \(k, k\)"),
    ],
)
def test_the_shift_operator_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        _ex().check_shift_operator(wrong)


def test_a_shift_operator_message_names_no_other_mistake_and_prints_no_whole_matrix():
    def transposed(r):
        return _lstsq(r, np.roll(r, -1, axis=0))

    with pytest.raises(AssertionError) as caught:
        _ex().check_shift_operator(transposed)
    text = str(caught.value)
    assert text.count("Hint:") == 1 and "c - 1" not in text
    assert "a (4, 4) array" in text and "largest difference" in text


def test_a_rotation_the_wrong_way_gets_the_hint_that_names_both_causes():
    """On a clean clock the transpose of A and the backward fit are the same matrix: the hint says so."""
    ex = _ex()
    clock = ex._clock(53, (3,))
    backward = ex._shift_mistakes(clock)["backward"]
    case = ex.Case((clock,), ex._library_operator(clock), "clock")
    hits = []

    def catch(student, cases, *, hints, **kwargs):
        hits.extend(text for test, text in hints if test(backward, case))
        return True

    original, ex.check_function = ex.check_function, catch
    try:
        ex.check_shift_operator(lambda r: r)
    finally:
        ex.check_function = original
    assert len(hits) == 1 and "Either it is the transpose of A, or it maps class c to class c - 1" in hits[0]
