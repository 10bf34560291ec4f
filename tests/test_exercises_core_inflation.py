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


def test_the_sufficient_rank_solution_passes_and_matches_the_chapters_scan(capsys):
    from corelib.ace import Core
    from corelib.interventions import refine_rank

    ns = run_solution("core_inflation", "ex-inflation-sufficient")
    assert _ex().check_sufficient_rank(ns["sufficient_rank"]) is True
    assert "all 10 cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(1)
    for _ in range(20):
        keep = np.sort(rng.uniform(0.0, 1.0, 32))  # a rising curve ...
        keep[rng.integers(0, 32, 4)] = rng.uniform(0.9, 1.0, 4)  # ... with bumps near the top
        baseline, tol = float(rng.uniform(0.95, 1.0)), 0.01
        core = Core(np.eye(32), np.arange(32, 0, -1.0), np.zeros(32))
        want = refine_rank(
            core, lambda c, mode, keep=keep: float(keep[c.rank - 1]) if mode == "keep" else 0.0,
            baseline=baseline, chance_level=0.0, tolerance=tol,
        )[1]  # fmt: skip
        assert ns["sufficient_rank"](keep, baseline, tol) == want


def _first_rank(pred):
    def rank(keep, baseline, tol):
        hits = np.flatnonzero(pred(np.asarray(keep), baseline, tol))
        return int(hits[0]) + 1 if hits.size else None

    return rank


def _stays_from(keep, baseline, tol):
    below = np.flatnonzero(np.asarray(keep) < baseline - tol)
    if not below.size:
        return 1
    return None if below[-1] == len(keep) - 1 else int(below[-1]) + 2


def _index_not_rank(keep, baseline, tol):
    r = _first_rank(lambda k, b, t: k >= b - t)(keep, baseline, tol)
    return None if r is None else r - 1


@pytest.mark.parametrize(
    ("wrong", "says", "not_says"),
    [
        (_first_rank(lambda k, b, t: k >= b), "you asked for the baseline itself", ">=, not >"),
        (_first_rank(lambda k, b, t: k > b - t), r">=, not >", "baseline itself"),
        (_first_rank(lambda k, b, t: np.abs(k - b) <= t), "keeps more than the model's own", "baseline itself"),
        (_stays_from, "even if the curve dips below", "index"),
        (_index_not_rank, r"rank = index \+ 1", "baseline itself"),
    ],
)
def test_the_sufficient_rank_check_names_each_typical_mistake(wrong, says, not_says):
    with pytest.raises(AssertionError, match=says) as err:
        _ex().check_sufficient_rank(wrong)
    assert not_says not in str(err.value)


def test_the_range_gap_solution_passes_and_agrees_with_the_chapters_overlap_word(capsys):
    from corelib.experiments.core_inflation import _overlap

    gap = run_solution("core_inflation", "ex-inflation-ranges")["range_gap"]
    assert _ex().check_range_gap(gap) is True
    assert "cases pass" in capsys.readouterr().out
    rng = np.random.default_rng(2)
    for _ in range(200):
        a, b = rng.integers(0, 30, 3).tolist(), rng.integers(0, 30, int(rng.integers(1, 4))).tolist()
        assert (gap(a, b) > 0) == (_overlap(a, b) == "do not overlap")
        assert gap(a, b) == gap(b, a) >= 0


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (lambda a, b: abs(np.mean(a) - np.mean(b)), "distance between the means"),
        (lambda a, b: max(min(a) - max(b), min(b) - max(a)), "your gap is negative"),
        (lambda a, b: max(0, min(b) - max(a)), "check both orders"),
        (lambda a, b: abs(min(b) - max(a)), "the gap is between the nearest ends"),
    ],
)
def test_the_range_gap_check_names_each_typical_mistake(wrong, says):
    with pytest.raises(AssertionError, match=says):
        _ex().check_range_gap(wrong)


def test_the_new_stubs_are_reported_as_not_done_yet(capsys):
    def stub(*args):
        raise NotImplementedError

    assert _ex().check_sufficient_rank(stub) is False
    assert _ex().check_range_gap(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 2


def test_the_seed_noise_solution_passes_and_the_check_names_the_usual_mistakes(capsys):
    from scipy import stats

    ns = run_solution("core_inflation", "ex-inflation-seed-noise")
    assert _ex().check_seed_noise_p(ns["p_value"]) is True
    assert "all 8 cases pass" in capsys.readouterr().out
    assert ns["p_value"]([63, 42, 48], 60) == pytest.approx(stats.ttest_1samp([63, 42, 48], 60).pvalue)

    def half(v, paper):
        return ns["p_value"](v, paper) / 2

    def normal(v, paper):
        v = np.asarray(v, dtype=float)
        z = (v.mean() - paper) / (v.std(ddof=1) / np.sqrt(v.size))
        return float(2 * stats.norm.sf(abs(z)))

    for wrong, says in ((half, "two-sided"), (normal, "Student's t")):
        with pytest.raises(AssertionError, match=says):
            _ex().check_seed_noise_p(wrong)


def test_the_seed_noise_solution_gives_the_chapters_p_values_on_the_recorded_run():
    from corelib.experiments import core_inflation_questions as iq
    from corelib.experiments import paper_scale

    recorded = paper_scale.recorded_inflation()
    if recorded is None:
        pytest.skip("no recorded core-inflation run in this checkout")
    ns = run_solution("core_inflation", "ex-inflation-seed-noise")
    ends = [m["core_dim"] for m in recorded["arms"]["wd"][-1]["models"]]
    assert ns["recorded_p_values"](recorded) == pytest.approx(
        (
            iq.seed_noise_p(ends, 60),
            ns["p_value"](
                [m["core_dim"] for r in recorded["arms"]["wd"] if r["epoch"] == 900 for m in r["models"]], 15
            ),
        )
    )
