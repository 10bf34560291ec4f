"""Impossible settings are refused by the parameter objects, before any work, naming the setting."""

from __future__ import annotations

import pytest

from corelib.experiments.ace_method import AceMethodParams
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.experiments.grokking_theory import TheoryParams
from corelib.experiments.markov_chain import MarkovParams
from corelib.experiments.modular_runs import ModularParams
from corelib.experiments.own_model import OwnModelParams
from corelib.models import TransformerConfig


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TransformerConfig(vocab_size=5, n_heads=0), "n_heads must be a whole number of at least 1, got 0"),
        (lambda: TransformerConfig(vocab_size=0), "vocab_size must be a whole number"),
        (lambda: TransformerConfig(vocab_size=5, d_model=0), "d_model must be a whole number"),
        (lambda: ModularParams(epochs=-5), r"epochs must be a whole number of epochs in \[1, 1,000,000\], got -5"),
        (lambda: ModularParams(batch_size=0), "batch_size must be a whole number"),
        (lambda: ModularParams(lr=0.0), r"lr must be a learning rate in \(0, 1\]"),
        (lambda: ModularParams(weight_decay=-1.0), "weight_decay must be a finite number >= 0"),
        (lambda: ModularParams(train_fraction=1.5), r"train_fraction is the share .* strictly between 0 and 1"),
        (lambda: ModularParams(p=2), "p must be a whole number of at least 3"),
        (lambda: ModularParams(epochs=2.5), "epochs must be a whole number"),
        (lambda: SweepsParams(n_seeds=0), "n_seeds must be a whole number of at least 1, got 0"),
        (lambda: SweepsParams(omegas=[1.0, -2.0]), r"omegas\[1\] must be a finite positive number, got -2.0"),
        (lambda: SweepsParams(moduli=[]), "omegas and moduli must each list at least one value"),
        (lambda: SweepsParams(moduli=[2, 53]), r"moduli must be whole numbers of at least 3, got \[2\]"),
        (lambda: SweepsParams(patience_epochs=-1), "patience_epochs must be a finite number >= 0"),
        (lambda: MarkovParams(epochs=0), "epochs must be a whole number"),
        (lambda: MarkovParams(energy=0.0), r"energy must lie in \(0, 1\]"),
        (lambda: AceMethodParams(rank=0), "rank must be a whole number of at least 1, got 0"),
        (lambda: AceMethodParams(rank=20), r"rank \(20\) cannot exceed n_states \(12\)"),
        (lambda: AceMethodParams(sim_steps=[100, 0]), r"sim_steps\[1\] must be a whole number"),
        (lambda: TheoryParams(omega=0.0), "omega must be a finite positive number, got 0.0"),
        (lambda: TheoryParams(sweep_omegas=(1.0, -1.0)), r"sweep_omegas\[1\] must be a finite positive number"),
        (
            lambda: TheoryParams(margin_ps=(2, 17)),
            r"moduli p, margin_ps and sweep_primes must be at least 3, got \[2\]",
        ),
        (lambda: OwnModelParams(n_phrases=0), "n_phrases must be a whole number of at least 1, got 0"),
        (lambda: OwnModelParams(n_per_number=1), "n_phrases and n_per_number must be at least 2"),
        (lambda: OwnModelParams(n_per_number=2.5), "n_per_number must be a whole number"),
        (lambda: OwnModelParams(agreement_layer=1.5), "agreement_layer must be None or a layer index"),
    ],
)
def test_impossible_settings_are_refused_with_their_name(make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_every_problem_is_named_at_once_with_the_fix() -> None:
    with pytest.raises(ValueError) as info:
        ModularParams(epochs=0, lr=-1.0)
    text = str(info.value)
    assert "epochs must be" in text and "lr must be" in text and text.endswith("Change these settings and run again.")


def test_the_papers_settings_pass() -> None:
    for make in (ModularParams, SweepsParams, MarkovParams, OwnModelParams, AceMethodParams, TheoryParams):
        make()
