"""Bad input, as a careless or hostile user gives it, is refused before any work with a message that
names the parameter: the parameter objects, the command line (before a kernel starts) and the
library's public functions. One table per layer; every row is one case."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from acebook import runner
from corelib import ace
from corelib.experiments.ace_method import AceMethodParams
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.experiments.grokking_theory import TheoryParams
from corelib.experiments.inflation_clock import ClockParams
from corelib.experiments.markov_chain import MarkovParams
from corelib.experiments.modular_runs import ModularParams
from corelib.experiments.own_model import OwnModelParams
from corelib.experiments.subject_verb_agreement import SVAParams
from corelib.models import Transformer, TransformerConfig

# Values that no whole-number count accepts, and none that a rate or a decay accepts.
NOT_COUNTS = [0, -1, 2.5, True, "3", math.inf]
NOT_EPOCHS = [0, -5, 2.5, False, "10", 10**22, 2_000_000]
NOT_RATES = [0.0, -1e-3, math.inf, math.nan, 1e30, 2.0, "fast", True]
NOT_DECAYS = [-1.0, math.inf, math.nan, "none"]
NOT_SEEDS = [-1, 2**32, 1.5, "0", True]
NOT_SEED_LISTS = [[0, 0], [0, 0.7], [1.9], "123", ["a"], [-3, 4], [0, 2**32], 7]

CASES: list[tuple[type, str, object]] = [
    *[(cls, name, v) for cls, names in (
        (MarkovParams, ("n_train", "n_test", "batch_size", "n_jacobians")),
        (ModularParams, ("batch_size", "n_jacobians", "snapshot_every", "d_model")),
        (SweepsParams, ("n_seeds", "n_boot")),
        (SVAParams, ("n_per_number", "max_new_tokens", "top_k")),
        (AceMethodParams, ("n_states", "pca_samples")),
    ) for name in names for v in NOT_COUNTS],
    *[(cls, name, v) for cls, name in (
        (MarkovParams, "epochs"), (ModularParams, "epochs"), (ModularParams, "long_epochs"),
        (SweepsParams, "omega_max_epochs"),
    ) for v in NOT_EPOCHS],
    *[(cls, "lr", v) for cls in (MarkovParams, ModularParams, SweepsParams) for v in NOT_RATES],
    *[(ModularParams, name, v) for name in ("weight_decay", "ridge") for v in NOT_DECAYS],
    *[(cls, name, v) for cls, name in (
        (MarkovParams, "train_seed"), (ModularParams, "split_seed"), (SweepsParams, "split_seed"),
        (SVAParams, "generation_seed"), (OwnModelParams, "dataset_seed"), (TheoryParams, "seed"),
        (AceMethodParams, "seed"),
    ) for v in NOT_SEEDS],
    *[(cls, "seeds", v) for cls in (MarkovParams, ModularParams, ClockParams) for v in NOT_SEED_LISTS],
    (MarkovParams, "seeds", [5]),  # a single model has nothing to be compared with
    (ClockParams, "seeds", [5]),
    (MarkovParams, "n_states", 1),
    (MarkovParams, "n_states", 100_000),  # a 75 GiB transition matrix
    (MarkovParams, "n_jacobians", 100_000),  # more than the test positions
    (MarkovParams, "dropout", 1.0),
    (ModularParams, "p", 100_000),  # 224 GiB of input pairs
    (ModularParams, "p", 2),
    (ModularParams, "p", 53.5),
    (ModularParams, "holdout_fraction", 2),
    (ModularParams, "holdout_fraction", 0),
    (ModularParams, "weight_decay", 5000.0),  # lr x wd >= 1
    (ModularParams, "dropout", 1.0),
    (ModularParams, "energy", 0.0),
    (ModularParams, "energy", 1.5),
    (ModularParams, "train_fraction", 0.0),
    (ModularParams, "n_heads", 3),  # 128 is not a multiple of 3
    (SweepsParams, "omegas", [1.0, -2.0]),
    (SweepsParams, "omegas", [math.inf]),
    (SweepsParams, "omegas", "1, 2"),
    (SweepsParams, "moduli", [2.5]),
    (SweepsParams, "moduli", [100_003]),
    (SweepsParams, "p_batch_size", 0),
    (SweepsParams, "threshold", 1.5),
    (ClockParams, "pairs", [["a", 1.0]]),
    (ClockParams, "pairs", [[1e-9, 1.0]]),  # a horizon of 6e10 epochs
    (ClockParams, "pairs", [[1e-3, 2000.0]]),
    (SVAParams, "temperature", 0.0),
    (SVAParams, "gate", 1.5),
    (SVAParams, "models", []),
    (SVAParams, "models", [1, 2]),
    (SVAParams, "sweep_modes", ["keep"]),
    (OwnModelParams, "n_phrases", 1),
    (OwnModelParams, "probe_l2", 0.0),
    (OwnModelParams, "models", ["smollm2-135m", "smollm2-135m"]),
    (TheoryParams, "omega", -1.0),
    (TheoryParams, "p", 2),
    (AceMethodParams, "spectral_radius", 1.5),
    (AceMethodParams, "rank", 20),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "name", "value"), CASES, ids=lambda x: repr(x)[:40])
def test_a_parameter_object_refuses_a_bad_value_naming_it(cls, name, value):
    with pytest.raises(ValueError) as info:
        cls(**{name: value})
    text = str(info.value)
    # the parameter is named (a list's entries by their list) and the message says what to do
    assert name in text or name.rstrip("s") in text, text
    assert len(text) > 40, text


def test_there_are_at_least_150_cases():
    assert len(CASES) + len(CLI_CASES) + len(LIBRARY_CASES) >= 150


# --------------------------------------------------------------------------- the command line

CLI_CASES: list[tuple[list[str], str]] = [
    (["run", "markov_chain", "-p", "seeds", "[0, 0]"], "seeds lists 0 more than once"),
    (["run", "markov_chain", "-p", "seeds", "[5]"], "at least 2 seeds"),
    (["run", "markov_chain", "-p", "seeds", "[1.9]"], "seeds must be whole numbers"),
    (["run", "markov_chain", "-p", "epochs", "10000000000000000000000"], "epochs must be a whole number of epochs"),
    (["run", "markov_chain", "-p", "lr", ".inf"], "lr must be a learning rate"),
    (["run", "markov_chain", "-p", "lr", "1e30"], "lr must be a learning rate"),
    (["run", "markov_chain", "-p", "n_states", "100000"], "n_states = 100000 needs about"),
    (["run", "markov_chain", "-p", "n_states", "0"], "n_states must be a whole number of at least 2"),
    (["run", "markov_chain", "-p", "n_jacobians", "100000"], "n_jacobians = 100000 exceeds"),
    (["run", "markov_chain", "-p", "nope", "1"], "unknown parameter 'nope'"),
    (["run", "markov_chain", "--profile", "nope"], "unknown profile 'nope'"),
    (["run", "modular_addition", "-p", "p", "100000"], "p = 100000 needs about"),
    (["run", "modular_addition", "-p", "split_seed", "-1"], "split_seed must be a whole number"),
    (["run", "core_inflation", "-p", "branch_weight_decay", "-1"], "branch_weight_decay must be"),
    (["run", "core_inflation", "-p", "long_epochs", "2.5"], "long_epochs must be a"),
    (["run", "core_inflation", "-p", "seeds", "[1, 1]"], "seeds lists 1 more than once"),
    (["run", "inflation_clock", "-p", "seeds", "[3]"], "at least 2 seeds"),
    (["run", "grokking_sweeps", "-p", "moduli", "[2]"], "moduli must be whole numbers of at least 3"),
    (["run", "markov_chain", "--device", "banana"], "device 'banana' is not a torch device"),
    (["run", "markov_chain", "--device", "cuda:7"], "is not on this machine"),
    (["run", "markov_chain", "-o", "/proc/x.ipynb"], "cannot write in /proc"),
    (["run", "markov_chain", "-o", "out.txt"], "give the file the suffix .ipynb"),
    (["list", "--profile", "nope"], "unknown profile 'nope'"),
    (["run", "../notebooks/markov_chain"], "never a path"),
]


@pytest.mark.parametrize(("argv", "message"), CLI_CASES, ids=lambda x: " ".join(x)[:50] if isinstance(x, list) else "")
def test_the_command_line_refuses_before_a_kernel_starts(argv, message, monkeypatch, tmp_path, capsys):
    if "cuda:7" in argv and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))

    def no_work(*args, **kwargs):
        raise AssertionError("a chapter was executed")

    monkeypatch.setattr(runner, "_run_jobs", no_work)
    assert runner.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


# --------------------------------------------------------------------------- the library

_rng = np.random.default_rng(0)
_H, _J = _rng.normal(size=(40, 4)), _rng.normal(size=(40, 2, 4))


def _model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=10, n_layers=1)).eval()


_X = torch.randint(0, 10, (12, 5), generator=torch.Generator().manual_seed(0))
_HOOK = "blocks.0.hook_resid_post"


def _from_model(**changes):
    args = {"inputs": _X, "target": lambda out: out[:, -1], **changes}
    return ace.extract_from_model(_model(), _HOOK, args.pop("inputs"), args.pop("target"), **args)


LIBRARY_CASES: list[tuple[object, str]] = [
    (lambda: ace.extract(_H, _J, rank=True), "rank must be a whole number"),
    (lambda: ace.extract(_H, _J, rank=2.5), "rank must be a whole number"),
    (lambda: ace.extract(_H, _J, rank=0), "rank must be a whole number"),
    (lambda: ace.extract(_H, _J, rank=9), r"rank must be a whole number in \[1, 4\]"),
    (lambda: ace.extract(_H, _J, energy=0), "energy must be a number in"),
    (lambda: ace.extract(_H, _J, energy="all"), "energy must be a number in"),
    (lambda: ace.extract(_H + 1j * _H, _J), "is complex"),
    (lambda: ace.extract(np.full((40, 4), np.nan), _J), "NaN/Inf"),
    (lambda: ace.extract(_H[:, :3], _J), "4"),
    (lambda: _from_model(inputs=_X + 10), "vocabulary has 10 tokens"),
    (lambda: _from_model(inputs=_X - 1), "vocabulary has 10 tokens"),
    (lambda: _from_model(batch_size=0), "batch_size must be a whole number"),
    (lambda: _from_model(batch_size=-1), "batch_size must be a whole number"),
    (lambda: _from_model(batch_size=2.5), "batch_size must be a whole number"),
    (lambda: _from_model(positions=torch.full((12,), 2.0)), "positions must be whole token positions"),
    (lambda: _from_model(positions=torch.zeros(3, dtype=torch.long)), r"positions must have shape \(12,\)"),
    (lambda: _from_model(positions="first"), "positions must be 'last'"),
    (lambda: _from_model(target=lambda out: torch.ones(out.shape[0])), "the target does not depend"),
    (lambda: _from_model(n_jacobians=100), r"n_jacobians must lie in \[1, 12\]"),
    (lambda: _from_model(inputs=_X[:1]), "at least 2 examples"),
]


@pytest.mark.parametrize(("call", "message"), LIBRARY_CASES)
def test_the_library_refuses_what_it_cannot_mean(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_numpy_inputs_are_taken_as_the_tensors_they_are():
    from_numpy = _from_model(inputs=_X.numpy())
    from_torch = _from_model()
    np.testing.assert_array_equal(from_numpy.basis, from_torch.basis)
