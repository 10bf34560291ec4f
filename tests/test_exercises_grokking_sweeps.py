"""The grokking-sweeps chapter's exercises: solutions run as printed, checks accept them and reject
typical mistakes with a message that says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from exercise_support import run_solution


def _times(train_acc, test_acc, threshold=0.99):
    def first(acc):
        hit = np.flatnonzero(np.asarray(acc) >= threshold)
        return int(hit[0]) + 1 if hit.size else None

    return first(train_acc), first(test_acc)


def test_the_times_solution_passes_its_check_and_matches_the_example(capsys):
    from corelib.exercises import grokking_sweeps as ex

    fn = run_solution("grokking_sweeps", "sweeps-ex-times")["grok_times"]
    assert ex.check_grok_times(fn) is True
    assert "all 9 cases pass" in capsys.readouterr().out
    assert fn(*ex.example_curves()) == (570, 2192, 1622)


def test_the_times_agree_with_the_sweeps_usable_delays():
    """The check's rule is the library's: a delay exists only where ``usable_delays`` keeps it."""
    import pandas as pd

    from corelib.exercises.grokking_sweeps import grok_times_of_counts
    from corelib.tasks.sweeps import usable_delays

    rows = [([90, 99], [10, 99]), ([99, 99], [99, 99]), ([10, 99, 99], [99, 99, 99]), ([10, 20], [99, 99])]
    table = []
    for tr, te in rows:
        t_mem, t_gen, delay = grok_times_of_counts(np.array(tr), 100, np.array(te), 100)
        raw = None if t_mem is None or t_gen is None else t_gen - t_mem  # as a record stores it
        table.append({"delay": raw, "ours": delay})
    frame = pd.DataFrame(table)
    assert list(usable_delays(frame)) == list(frame["ours"].notna())


def _wrong_times(*, from_zero=False, strict=False, any_delay=False, nan=False):
    def grok_times(train_acc, test_acc, threshold=0.99):
        def first(acc):
            acc = np.asarray(acc)
            hit = np.flatnonzero(acc > threshold if strict else acc >= threshold)
            return int(hit[0]) + (0 if from_zero else 1) if hit.size else None

        t_mem, t_gen = first(train_acc), first(test_acc)
        both = t_mem is not None and t_gen is not None
        delay = t_gen - t_mem if both and (any_delay or t_gen > t_mem) else None
        out = (t_mem, t_gen, delay)
        return tuple(float("nan") if nan and v is None else v for v in out)

    return grok_times


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_wrong_times(from_zero=True), "steps count from 1"),
        (_wrong_times(strict=True), "compare with >=, not >"),
        (_wrong_times(any_delay=True), r"t_gen <= t_mem\) has no delay"),
        (_wrong_times(nan=True), "return None, not NaN"),
        (lambda a, b, t: _times(a, b, t), "is wrong on case 1"),  # two numbers, not three
    ],
)
def test_the_times_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import grokking_sweeps as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_grok_times(wrong)


def test_the_power_law_solution_passes_and_finds_the_recorded_exponent(capsys):
    from corelib.exercises import grokking_sweeps as ex
    from corelib.theory import fit_power_law

    ns = run_solution("grokking_sweeps", "sweeps-ex-powerlaw")
    assert ex.check_power_law(ns["power_law"]) is True
    assert "all 6 cases pass" in capsys.readouterr().out
    means = ns["means"]
    fit = fit_power_law(means.index.to_numpy(), means.to_numpy())
    assert (ns["beta"], ns["C"]) == pytest.approx((fit.exponent, fit.prefactor), rel=1e-9)
    assert ns["beta"] == pytest.approx(-1.02, abs=0.01)


def _swapped(coefficients):
    slope, intercept = coefficients
    return intercept, np.exp(slope)


def _reversed_regression(x, y):
    b, a = np.polyfit(np.log(y), np.log(x), 1)
    return 1 / b, np.exp(-a / b)


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_reversed_regression, "regress log y on log x"),
        (lambda x, y: tuple(np.polyfit(x, y, 1)), "not to x and y themselves"),
        (lambda x, y: tuple(np.polyfit(np.log(x), np.log(y), 1)), "you returned log C"),
        (lambda x, y: _swapped(np.polyfit(np.log(x), np.log(y), 1)), "the slope first"),
    ],
)
def test_the_power_law_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import grokking_sweeps as ex

    with pytest.raises(AssertionError, match=says):
        ex.check_power_law(wrong)


def test_a_stub_is_reported_as_not_done_yet(capsys):
    from corelib.exercises import grokking_sweeps as ex

    def stub(*args):
        raise NotImplementedError

    assert ex.check_grok_times(stub) is False and ex.check_power_law(stub) is False
    assert ex.check_early_exit(stub) is False
    assert capsys.readouterr().out.count("not implemented yet") == 3


def test_the_prediction_solution_runs_and_predicts_the_stated_delay(monkeypatch):
    """The solution as printed, with the training replaced by the records it gave (3 min of CPU)."""
    import pandas as pd

    from corelib.experiments import grokking_sweeps, paper_scale
    from corelib.tasks import sweeps
    from exercise_support import solution_code

    trained = []

    def fake_run_sweep(conditions, seeds, cfg, **kwargs):
        trained.append((conditions, list(seeds), cfg))
        return pd.DataFrame({"seed": [42, 43, 44], "t_mem": [138, 132, 133], "t_gen": [701, 707, 707],
                             "delay": [563, 575, 574]})  # fmt: skip

    monkeypatch.setattr(sweeps, "run_sweep", fake_run_sweep)
    book = {"n_seeds": 3, "moduli": [43, 61, 79], "p_weight_decay": 3.0, "p_max_epochs": 4000, "precision": "auto"}
    ns = {"recorded": paper_scale.recorded_sweeps(n_boot=2), "params": grokking_sweeps.SweepsParams(**book)}
    exec(compile(solution_code("grokking_sweeps", "sweeps-ex-predict"), "predict", "exec"), ns)
    assert ns["predicted"] == pytest.approx(527, abs=1)
    ((condition,), seeds, cfg) = trained[0]
    assert (condition.p, condition.weight_decay, condition.batch_size) == (53, 3.0, None)
    assert seeds == [42, 43, 44] and cfg.precision == "fp32" and cfg.max_epochs == 4000


def test_the_early_exit_solution_passes_and_reads_the_stated_counts(capsys):
    from corelib.exercises import grokking_sweeps as ex
    from corelib.tasks.sweeps import min_correct

    fn = run_solution("grokking_sweeps", "sweeps-ex-early-exit")["early_exit"]
    assert ex.check_early_exit(fn) is True
    assert "all 14 cases pass" in capsys.readouterr().out
    answers = ex.example_answers()
    assert {k: fn(v) for k, v in answers.items()} == {
        "chance": (False, 17),
        "nearly": (False, 1145),
        "memorised": (True, 1404),
    }
    assert 1404 - min_correct(1404, 0.99) == 14  # the budget the solution quotes
    for threshold in (0.07, 0.5, 0.9, 0.99, 1.0):  # the decision is the naive evaluation's
        for correct in answers.values():
            n = correct[:100].size
            assert fn(correct[:100], threshold)[0] == (correct[:100].sum() / n >= threshold)


def _wrong_early_exit(*, budget_rule="exact", stop_early=False, index=False, short_pass=False):
    import math

    def early_exit(correct, threshold=0.99):
        correct = np.asarray(correct, dtype=bool)
        n = correct.size
        if budget_rule == "ceil":
            budget = n - math.ceil(threshold * n)
        elif budget_rule == "floor":
            budget = n - int(threshold * n)
        else:
            budget = max(e for e in range(n + 1) if (n - e) / n >= threshold)
        errors = np.cumsum(~correct)
        over = np.flatnonzero(errors >= budget if stop_early else errors > budget)
        if over.size:
            return False, int(over[0]) + (0 if index else 1)
        return True, int(np.flatnonzero(~correct)[-1]) + 1 if short_pass and (~correct).any() else n

    return early_exit


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (_wrong_early_exit(stop_early=True), "n_checked is one too small"),
        (_wrong_early_exit(budget_rule="floor"), "you allowed one error too many"),
        (_wrong_early_exit(budget_rule="ceil"), r"0\.07 \* 100 = 7\.000000000000001"),
        (_wrong_early_exit(index=True), "counts it among the answers read"),
        (_wrong_early_exit(short_pass=True), "read to the end"),
        (lambda correct, threshold: bool(np.mean(correct) >= threshold), "is wrong on case 1"),  # no count
    ],
)
def test_the_early_exit_check_rejects_typical_mistakes(wrong, says):
    from corelib.exercises import grokking_sweeps as ex

    with pytest.raises(AssertionError, match=says) as err:
        ex.check_early_exit(wrong)
    assert len(str(err.value)) < 800  # a short message, never the whole array of answers


def test_stopping_one_error_early_is_named_where_it_changes_the_decision():
    """On a model with exactly the errors allowed, stopping one error early fails a model that passes."""
    from corelib.exercises import grokking_sweeps as ex

    wrong = _wrong_early_exit(stop_early=True)

    def only_the_edge(correct, threshold=0.99):
        right = run_solution("grokking_sweeps", "sweeps-ex-early-exit")["early_exit"](correct, threshold)
        return wrong(correct, threshold) if right[0] else right

    with pytest.raises(AssertionError, match="you stopped one error too early") as err:
        ex.check_early_exit(only_the_edge)
    assert "one too small" not in str(err.value)


def test_the_early_exit_hints_name_only_what_the_answer_shows():
    """A wrong answer that is none of the usual mistakes gets the plain report, no hint."""
    from corelib.exercises import grokking_sweeps as ex

    with pytest.raises(AssertionError) as err:
        ex.check_early_exit(lambda correct, threshold: (False, 3))
    assert "Hint" not in str(err.value)
