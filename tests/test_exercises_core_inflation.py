"""The exercises of the chapter "Core inflation": their solutions (``book/solutions/core_inflation.md``)
pass their checks, and the checks reject typical wrong answers with a message that says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from exercise_support import run_solution


def _ex():
    from corelib.exercises import core_inflation

    return core_inflation


def _solution():
    return run_solution("core_inflation", "ex-inflation-necessary")


def test_the_necessary_rank_solution_passes_and_matches_the_library(capsys):
    from corelib.experiments import modular_runs

    ns = _solution()
    assert _ex().check_necessary_rank(ns["necessary_rank"]) is True
    assert "all 8 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(0)
    curves = {"rank": np.arange(1, 65), "energy_rank": np.array([3, 10, 40]), "remove": rng.uniform(0, 0.2, (3, 64))}
    for level in (0.01, 2 / 53, 0.1):
        want = modular_runs.first_rank_at_or_below(curves, level)
        got = [ns["necessary_rank"](r, e, level) for r, e in zip(curves["remove"], curves["energy_rank"])]
        assert got == want
        assert ns["mean_necessary_rank"](curves, level) == pytest.approx(modular_runs.mean_rank(want), nan_ok=True)


def _stays_below_from(remove, energy_rank, level):
    above = np.flatnonzero(np.asarray(remove) > level)
    r = int(above[-1]) + 2 if above.size else 1
    return max(r, energy_rank) if r <= len(remove) else None


def _from_rank_one(remove, energy_rank, level):
    hits = np.flatnonzero(np.asarray(remove) <= level)
    return int(hits[0]) + 1 if hits.size else None


def _strict(remove, energy_rank, level):
    ranks = np.arange(1, len(remove) + 1)
    hits = ranks[(np.asarray(remove) < level) & (ranks >= energy_rank)]
    return int(hits[0]) if hits.size else None


def _index(remove, energy_rank, level):
    r = _strict(remove, energy_rank, level + 1e-12)
    return None if r is None else r - 1


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_stays_below_from, "even if the curve rises above it again"),
        (_from_rank_one, "start at the energy rank"),
        (_strict, r"<=, not <"),
        (_index, r"rank = index \+ 1"),
    ],
)
def test_the_necessary_rank_check_rejects_typical_mistakes(wrong, says):
    with pytest.raises(AssertionError, match=says):
        _ex().check_necessary_rank(wrong)


def test_a_missing_answer_is_asked_for_as_none():
    solution = _solution()["necessary_rank"]

    def zero_for_none(remove, energy_rank, level):
        got = solution(remove, energy_rank, level)
        return 0 if got is None else got

    with pytest.raises(AssertionError, match=r"(?s)case 4 of 8 .*returned 0.*return None"):
        _ex().check_necessary_rank(zero_for_none)


def test_the_stub_is_reported_as_not_done_yet(capsys):
    def stub(remove, energy_rank, level):
        raise NotImplementedError

    assert _ex().check_necessary_rank(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_the_gap_solution_plots_one_line_per_arm():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = run_solution("core_inflation", "ex-inflation-gap")

    def rec(epoch, necessary, sufficient):
        return {
            "epoch": epoch,
            "models": [{"necessary_rank": n, "sufficient_rank": s} for n, s in zip(necessary, sufficient)],
        }

    arms = {"wd": [rec(900, [13, 13], [9, 9]), rec(1000, [20, 30], [9, 11])], "no_wd": [rec(900, [13, 13], [9, 9])]}
    plt.figure()
    ns["plot_gaps"](arms)
    lines = plt.gca().get_lines()
    assert [ln.get_label() for ln in lines] == ["wd", "no_wd"]
    assert lines[0].get_ydata().tolist() == [4.0, 15.0]
    plt.close("all")
