"""The modulus law near its critical modulus (corelib.experiments.grokking_sweeps_moduli)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from corelib.experiments import grokking_sweeps_moduli as near


def _table(moduli, omega=3000.0, p_crit=21.0, seeds=12, noise=0.15, seed=0) -> pd.DataFrame:
    """Per-seed delays drawn around the grokking-time law, as the sweeps keep them."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in moduli:
        tau = omega * -np.log(1 - p_crit / p)
        for s in range(seeds):
            delay = tau * np.exp(rng.normal(0, noise))
            rows.append({"seed": s, "condition": f"p{p}", "p": p, "weight_decay": 1.0, "t_mem": 100.0,
                         "t_gen": 100.0 + delay, "delay": delay})  # fmt: skip
    return pd.DataFrame(rows)


def test_moduli_near_p_crit_pin_omega_down_and_find_the_law():
    far = _table([31, 43, 53, 61, 79, 89, 101])
    close = _table([23, 29], seed=1)
    law = near.modulus_law(far, close, n_boot=200)
    assert law.near == (23, 29) and list(law.summary.index) == [23, 29, 31, 43, 53, 61, 79, 89, 101]
    found = near.finding_values(law, weight_decay=1.0)
    assert found["sweeps.near_Omega_sd"] < 0.5  # the near moduli at least halve Omega's relative spread
    assert found["sweeps.near_Omega"] == pytest.approx(3000, rel=0.1)
    assert law.with_near.loc["p_crit", "estimate"] == pytest.approx(21, abs=1)
    values = near.glue_values(law, 1.0)
    assert values["near_moduli"] == "23, 29" and values["near_runs"] == 24
    missing = near.glue_values(None, 1.0)
    assert missing["near_moduli"] == "n/a" and np.isnan(missing["near_Omega"])


def test_the_finding_scales_omega_to_weight_decay_one():
    law = near.modulus_law(_table([31, 43, 53, 61]), _table([23, 29], seed=2), n_boot=50)
    at_two = near.finding_values(law, weight_decay=2.0)["sweeps.near_Omega"]
    assert at_two == pytest.approx(2 * near.finding_values(law, weight_decay=1.0)["sweeps.near_Omega"])


def test_the_modulus_sweeps_hours_are_its_conditions_seconds_summed():
    from types import SimpleNamespace

    conds = [SimpleNamespace(label=lambda p=p: f"p={p}") for p in (31, 43)]
    rec = SimpleNamespace(params=SimpleNamespace(p_conditions=lambda: conds),
                          provenance={"training_seconds": {"p=31": 3600, "p=43": 1800, "p=53 wd=3": 999}})  # fmt: skip
    assert near.modulus_sweep_hours(rec) == pytest.approx(1.5)
    rec.provenance["training_seconds"]["p=43"] = None
    assert np.isnan(near.modulus_sweep_hours(rec)) and np.isnan(near.modulus_sweep_hours(None))
