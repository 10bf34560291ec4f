"""Issue 47's fault table, the part ``test_untrusted_input.py`` does not hold: settings objects,
environment variables, the record commands, the command line's unclear cases and the exercise
checks. Every row is one hostile or careless input; each asserts the refusal, its message (the
problem and the fix) and that nothing was written."""

from __future__ import annotations

import json
import math
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from acebook import paper_runs, project, record, runner
from corelib import exercises, results
from corelib.engine import StackConfig
from corelib.exercises import Case, ace_method, check_function, markov_chain
from corelib.experiments.ace_method import energy_rank
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.experiments.inflation_clock import ClockParams
from corelib.experiments.modular_runs import ModularParams
from corelib.recorded import RECORDED_DIR
from corelib.results import save_json
from corelib.steering import SteeringConfig
from corelib.tasks.sweeps import SweepConfig


def _tree(root: Path) -> dict[str, object]:
    """Every file under ``root`` with its bytes (links by their target): what "nothing was written" compares."""
    out: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_file():
                out[rel] = path.read_bytes()
            else:
                out[rel] = "folder"
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A results root that does not exist yet (``ACE_RESULTS_DIR``) and no device override."""
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("ACE_DEVICE", raising=False)
    monkeypatch.delenv("ACE_PROGRESS", raising=False)
    return tmp_path


def _no_work(*args, **kwargs):
    raise AssertionError("work started: a chapter, a training run or a recompute")


# --------------------------------------------------------------------------- settings objects

SETTINGS_CASES: list[tuple[type, dict, list[str]]] = [
    (SweepConfig, {"lr": math.nan}, ["SweepConfig: lr must be a learning rate", "got nan"]),
    (SweepConfig, {"lr": math.inf}, ["SweepConfig: lr must be a learning rate", "got inf"]),
    (SweepConfig, {"train_fraction": 0}, ["train_fraction is the share", "strictly between 0 and 1", "got 0"]),
    (SweepConfig, {"train_fraction": 1.5}, ["train_fraction is the share", "got 1.5", "the paper: 0.5"]),
    (SweepConfig, {"threshold": math.nan}, ["threshold must lie in (0, 1]"]),
    (SweepConfig, {"max_epochs": 2.5}, ["max_epochs must be a whole number of epochs"]),
    (SweepsParams, {"n_jobs": 0}, ["n_jobs must be None", "-1 for every CPU", "got 0"]),
    (SweepsParams, {"n_jobs": 1.5}, ["n_jobs must be None"]),
    (SweepsParams, {"moduli": [31, 43, 31]}, ["moduli lists 31 more than once", "Remove the repeat"]),
    (SweepsParams, {"omegas": [1.0, 2.0, 1]}, ["omegas lists 1.0 more than once", "Remove the repeat"]),
    (SweepsParams, {"train_fraction": 1.0}, ["train_fraction is the share", "got 1.0"]),
    (ModularParams, {"eval_every": 10**6}, ["eval_every (1000000) is longer than the shorter run", "eval_every <="]),
    (ModularParams, {"train_fraction": 1.0}, ["train_fraction is the share", "got 1.0"]),
    (ClockParams, {"anneal": [0.12, 0.04]}, ["anneal lists the short span of tau, then the long one", "increasing"]),
    (ClockParams, {"anneal": [2.0, 2.0]}, ["anneal lists the short span", "got [2.0, 2.0]"]),
    (StackConfig, {"epochs": 5, "lr": math.nan}, ["StackConfig: lr must be a finite positive number", "got nan"]),
    (StackConfig, {"epochs": 5, "weight_decay": (1.0, -1.0)}, ["weight_decay[1] must be a finite number >= 0"]),
    (StackConfig, {"epochs": 2.5}, ["epochs must be a whole number of epochs"]),
    (StackConfig, {"epochs": 5, "batch_size": 0}, ["batch_size must be a whole number of at least 1"]),
    (SteeringConfig, {"probe": math.nan}, ["SteeringConfig: probe must be a finite number >= 0"]),
    (SteeringConfig, {"cap": math.inf}, ["cap must be a finite number"]),
]


@pytest.mark.parametrize(("cls", "values", "fragments"), SETTINGS_CASES, ids=lambda x: repr(x)[:40])
def test_a_settings_object_refuses_at_construction(cls, values, fragments, home):
    with pytest.raises(ValueError) as info:
        cls(**values)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert not (home / "results").exists()


def test_the_defaults_and_the_profiles_settings_still_build():
    SweepConfig()
    SweepsParams(n_jobs=-1)
    SweepsParams(moduli=[13, 17], omegas=[2.0, 3.0], train_fraction=0.8)  # the smoke profile's
    ModularParams(eval_every=2000)
    ClockParams(anneal=[0.04, 0.12])
    StackConfig(epochs=0, weight_decay=(0.0, 1.0))
    SteeringConfig(cap=None)


# --------------------------------------------------------------------------- environment variables


def _a_file(tmp: Path) -> str:
    (tmp / "a_file").write_text("not a folder")
    return str(tmp / "a_file")


def _read_only(tmp: Path) -> str:
    folder = tmp / "locked"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return str(folder / "results")


ENV_CASES: list[tuple[str, str, object, list[str]]] = [
    ("results dir a file", "ACE_RESULTS_DIR", _a_file, ["a_file is a file, not a folder", "point it at a folder"]),
    (
        "results dir, parent missing",
        "ACE_RESULTS_DIR",
        lambda t: str(t / "no" / "such" / "results"),
        ["its parent folder", "does not exist (create it first: mkdir -p", "or unset it"],
    ),
    ("results dir read-only", "ACE_RESULTS_DIR", _read_only, ["cannot write in", "point it at a folder you can"]),
    ("device bogus", "ACE_DEVICE", lambda t: "bogus", ["ACE_DEVICE='bogus'", "is not a torch device", "this machine"]),
    ("device cuda, none here", "ACE_DEVICE", lambda t: "cuda", ["ACE_DEVICE='cuda'", "is not on this machine"]),
    ("progress maybe", "ACE_PROGRESS", lambda t: "maybe", ["ACE_PROGRESS='maybe' is not a switch", "yes", "off"]),
    ("progress 2", "ACE_PROGRESS", lambda t: "2", ["ACE_PROGRESS='2' is not a switch", "or unset it"]),
]


def _skip_unless_refusable(case: str) -> None:
    if case == "results dir read-only" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder; the refusal is for everyone else")
    if case == "device cuda, none here" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")


@pytest.mark.parametrize(("case", "variable", "value", "fragments"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_an_environment_variable_is_refused_like_a_flag_before_a_kernel_starts(
    case, variable, value, fragments, home, monkeypatch, capsys
):
    _skip_unless_refusable(case)
    monkeypatch.setenv(variable, value(home))
    monkeypatch.setattr(runner, "_run_jobs", _no_work)
    before = _tree(home)
    started = time.perf_counter()
    assert runner.main(["run", "markov_chain"]) == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err, err
    assert time.perf_counter() - started < 60  # not from a cell after the model trained: before anything
    assert _tree(home) == before


@pytest.mark.parametrize(("case", "variable", "value", "fragments"), ENV_CASES[:3], ids=[c[0] for c in ENV_CASES[:3]])
def test_paper_runs_refuses_a_results_folder_it_cannot_use(case, variable, value, fragments, home, monkeypatch):
    _skip_unless_refusable(case)
    monkeypatch.setenv(variable, value(home))
    monkeypatch.setattr(paper_runs, "IN_PROGRESS", home / "in_progress")
    monkeypatch.setattr(paper_runs, "advance_inflation", _no_work)
    before = _tree(home)
    with pytest.raises(SystemExit) as info:
        paper_runs.main(["advance", "core_inflation", "--profile", "smoke"])
    assert str(info.value.code).startswith("paper_runs advance: ACE_RESULTS_DIR=")
    for fragment in fragments:
        assert fragment in str(info.value.code)
    assert _tree(home) == before


def test_a_device_flag_replaces_the_variable_and_a_valid_one_passes(home, monkeypatch):
    monkeypatch.setenv("ACE_DEVICE", "bogus")
    project.check_environment(device=False)  # --device given: the variable is replaced, not read
    monkeypatch.setenv("ACE_DEVICE", "cpu")
    project.check_environment()


@pytest.mark.parametrize(
    ("text", "switch"),
    [("1", True), ("yes", True), ("True", True), (" ON ", True), ("0", False), ("No", False), ("FALSE", False),
     ("off", False), ("", None)],
)  # fmt: skip
def test_progress_takes_the_usual_switches_in_any_case(text, switch, monkeypatch):
    monkeypatch.setenv("ACE_PROGRESS", text)
    assert project.progress_switch() is switch


def test_an_empty_results_variable_is_unset_not_the_working_directory(monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", "")
    assert results.results_root() == results.PROJECT_ROOT / "results"
    project.check_environment()  # empty: nothing to refuse


# --------------------------------------------------------------------------- records


@pytest.fixture
def recorded(home, monkeypatch):
    """A copy of recorded/grokking_sweeps_paper (and book_claims.json) in ``ACE_RECORDED_DIR``,
    every file written through the store: a hostile row rewrites one with a consistent manifest."""
    root = home / "recorded"
    folder = root / "grokking_sweeps_paper"
    for name in ("provenance.json", "records.json"):
        save_json(folder / name, json.loads((RECORDED_DIR / "grokking_sweeps_paper" / name).read_text()))
    save_json(root / record.CLAIMS_FILE, json.loads((RECORDED_DIR / record.CLAIMS_FILE).read_text()))
    monkeypatch.setenv("ACE_RECORDED_DIR", str(root))
    monkeypatch.setattr(record, "run_condition", _no_work)
    return folder


def _records(change):
    def rewrite(folder: Path) -> None:
        rows = json.loads((folder / "records.json").read_text())
        save_json(folder / "records.json", change(rows))

    return rewrite


def _entry(**changes):
    return _records(lambda rows: [{**rows[0], **changes}, *rows[1:]])


def _provenance(**changes):
    def rewrite(folder: Path) -> None:
        save_json(folder / "provenance.json", {**json.loads((folder / "provenance.json").read_text()), **changes})

    return rewrite


def _damage(folder: Path) -> None:
    path = folder / "records.json"
    path.write_bytes(path.read_bytes().replace(b"42", b"43", 1))


def _arms_of_another_experiment(folder: Path) -> None:
    arms = [{"epoch": 100, "models": [{"core_dim": 3}], "test_acc": 0.5}]
    save_json(folder / "records.json", arms)


_FROM_GIT = "git checkout -- "
VERIFY_CASES: list[tuple[str, object, list[str]]] = [
    ("records []", _records(lambda rows: []), ["must be a non-empty list of per-seed records", _FROM_GIT]),
    ("records a dict", _records(lambda rows: {"records": rows}), ["must be a non-empty list", "got dict"]),
    ("a seed in words", _entry(seed="42"), ["records.json entry 0", "seed", _FROM_GIT]),
    ("t_gen a string", _entry(t_gen="5295"), ["records.json entry 0", "t_gen", _FROM_GIT]),
    ("another experiment's records", _arms_of_another_experiment, ["is not a record of a condition of these sweeps"]),
    (
        "the condition's seeds missing",
        _records(lambda rows: [r for r in rows if r["seed"] != 42]),
        ["holds no record of p=53 wd=1 B=512 for the seeds [42]", _FROM_GIT],
    ),
    ("another experiment's provenance", _provenance(experiment="core_inflation"), ["'core_inflation''s, not"]),
    ("provenance without settings", _provenance(params={"moduli": "all"}), ["holds no settings of the sweeps"]),
    ("a damaged record", _damage, ["records.json is damaged or was edited", "Do not recompute it", _FROM_GIT]),
    (
        "a deleted manifest",
        lambda folder: (folder / "manifest.json").unlink(),
        ["manifest.json is missing", "cannot be verified", _FROM_GIT],
    ),
]


@pytest.mark.parametrize(("case", "hostile", "fragments"), VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_refuses_a_bad_record_instead_of_recomputing_it(case, hostile, fragments, recorded, home):
    hostile(recorded)
    before = _tree(home)
    with pytest.raises(SystemExit) as info:
        record.main(["verify", "grokking_sweeps", "--condition", "p=53 wd=1 B=512", "--seeds", "1"])
    message = str(info.value.code)
    for fragment in fragments:
        assert fragment in message, message
    assert "delete it" not in message  # a recorded run is restored, never recomputed
    assert _tree(home) == before


RECORD_CASES: list[tuple[list[str], list[str], list[str]]] = [
    (
        ["claims", "--profile", "nonexistent", "--missing-ok"],
        ["unknown profile 'nonexistent'", "smoke, book, paper"],
        [],
    ),
    (
        ["claims", "--profile", "smoke", "--missing-ok"],
        ["were recorded with the smoke profile", "not built there", "Nothing was written", "build it first"],
        [],
    ),
    (
        ["costs", "--profile", "nonexistent"],
        ["unknown profile 'nonexistent'", "smoke, book, paper"],
        ["ace-book build"],
    ),
    (["export", "core_inflation", "--profile", "nonexistent"], ["unknown profile 'nonexistent'"], []),
]


@pytest.mark.parametrize(("argv", "fragments", "absent"), RECORD_CASES, ids=lambda x: " ".join(x)[:50])
def test_a_record_command_never_overwrites_a_record_from_a_profile_not_built(argv, fragments, absent, recorded, home):
    before = _tree(home)
    with pytest.raises(SystemExit) as info:
        record.main(argv)
    message = str(info.value.code)
    for fragment in fragments:
        assert fragment in message, message
    for fragment in absent:
        assert fragment not in message, message
    assert _tree(home) == before


# --------------------------------------------------------------------------- the command line


def test_o_naming_the_runners_own_output_is_refused(home, monkeypatch, capsys):
    monkeypatch.setattr(runner, "_run_jobs", _no_work)
    own = runner.output_path("markov_chain")
    stat_before = own.stat().st_mtime_ns if own.exists() else None
    for given in (str(own), os.path.relpath(own)):
        assert runner.main(["run", "markov_chain", "-o", given]) == 2
        err = capsys.readouterr().err
        assert "the runner writes the executed chapter there already" in err and "leave -o out" in err, err
    assert (own.stat().st_mtime_ns if own.exists() else None) == stat_before
    assert not (home / "results").exists()


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["-p", "lr", "-1e-3"], ["lr must be a learning rate in (0, 1]", "got -0.001"]),
        (["-p", "lr", "-.5"], ["lr must be a learning rate", "got -0.5"]),
        (["-p", "epochs", "-1"], ["epochs must be a whole number of epochs", "got -1"]),
        (["-p", "seeds", "[-1, 2]"], ["seeds must be whole numbers in [0, 2**32)"]),
    ],
    ids=lambda x: " ".join(x)[:30],
)
def test_a_negative_value_reaches_its_check_instead_of_argparse(argv, fragments, home, monkeypatch, capsys):
    monkeypatch.setattr(runner, "_run_jobs", _no_work)
    assert runner.main(["run", "markov_chain", *argv]) == 2
    err = capsys.readouterr().err
    assert "expected 2 arguments" not in err
    for fragment in fragments:
        assert fragment in err, err
    assert not (home / "results").exists()


def test_negative_values_are_taken_as_values(monkeypatch):
    seen = {}
    monkeypatch.setattr(runner, "run_notebook", lambda name, profile, overrides, **kw: seen.update(overrides))
    monkeypatch.setattr(runner, "show_path", str)
    assert runner.main(["run", "grokking_theory", "-p", "omega", "-2", "-p", "x", "-1e-3", "--force"]) == 0
    assert seen == {"omega": -2, "x": -1e-3}


# --------------------------------------------------------------------------- exercise checks


def _loops(*args):
    while True:
        time.sleep(0.01)


def _exits(*args):
    raise SystemExit(0)


def _interrupts(*args):
    raise KeyboardInterrupt


def _true_for_one(s, t):
    rank = energy_rank(s, t)
    return True if rank == 1 else rank


EXERCISE_CASES: list[tuple[str, object, object, list[str]]] = [
    (
        "loops forever",
        markov_chain.check_oracle_r2,
        _loops,
        ["oracle_r2 did not finish case 1 of 6", "time limit of 0.5 s per case", "restart the kernel"],
    ),
    (
        "sys.exit(0)",
        markov_chain.check_oracle_r2,
        _exits,
        ["oracle_r2 called exit (SystemExit: 0) on case 1", "remove the exit() or sys.exit() call"],
    ),
    (
        "raises KeyboardInterrupt",
        markov_chain.check_oracle_r2,
        _interrupts,
        ["oracle_r2 raised KeyboardInterrupt on case 1", "remove that raise"],
    ),
    (
        "True for the rank 1",
        ace_method.check_energy_rank,
        _true_for_one,
        ["energy_rank is wrong on case 7 of 8 (a single value)", "returned True, a bool, where a number is expected"],
    ),
]


@pytest.mark.parametrize(("case", "check", "student", "fragments"), EXERCISE_CASES, ids=[c[0] for c in EXERCISE_CASES])
def test_an_exercise_check_survives_the_student(case, check, student, fragments, home, monkeypatch, capsys):
    monkeypatch.setattr(exercises, "TIME_LIMIT", 0.5)
    started = time.perf_counter()
    with pytest.raises(AssertionError) as info:
        check(student)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert time.perf_counter() - started < 30  # the loop was left behind, not waited for
    assert "pass" not in capsys.readouterr().out
    assert not (home / "results").exists()


TYPE_CASES: list[tuple[str, object, object, str]] = [
    ("a bool for an int", 1, True, "returned True, a bool, where a number is expected"),
    ("a numpy bool for a float", 0.0, np.False_, "a bool, where a number is expected"),
    ("a list for an array", np.arange(3.0), [0.0, 1.0, 2.0], "returned a list where a numpy array is expected"),
    ("a tensor for an array", np.arange(3.0), torch.arange(3.0), "returned a torch tensor where a numpy array"),
    ("inside a tuple", (np.ones(2), np.zeros(2)), (np.ones(2), torch.zeros(2)), "returned a torch tensor where"),
]


@pytest.mark.parametrize(("case", "expected", "got", "fragment"), TYPE_CASES, ids=[c[0] for c in TYPE_CASES])
def test_an_answer_of_the_wrong_type_is_named(case, expected, got, fragment):
    with pytest.raises(AssertionError, match="is wrong on case 1 of 1") as info:
        check_function(lambda: got, [Case((), expected, case)], name="answer")
    assert fragment in str(info.value)
    assert check_function(lambda: expected, [Case((), expected, case)], name="answer") is True


def test_the_check_keeps_the_callers_gradient_mode():
    with torch.no_grad():
        assert check_function(torch.is_grad_enabled, [Case((), False, "under no_grad")], name="grad") is True
    assert check_function(torch.is_grad_enabled, [Case((), True, "with gradients")], name="grad") is True


def test_every_category_has_rows():
    rows = {
        "settings": SETTINGS_CASES,
        "environment": ENV_CASES,
        "records": VERIFY_CASES + RECORD_CASES,
        "exercises": EXERCISE_CASES + TYPE_CASES,
    }
    assert all(len(v) >= 4 for v in rows.values()), {k: len(v) for k, v in rows.items()}
