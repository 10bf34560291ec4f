"""Interventions: hook algebra on known cores, through a real hooked model, and rank refinement."""

import numpy as np
import pytest
import torch

from corelib.ace import Core
from corelib.interventions import ablation_curve, accuracy, intervention_accuracy, intervention_hook, refine_rank
from corelib.models import Transformer, TransformerConfig, resid_hook


def _core(d=6, r=2, seed=0, mean=None):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, r)))
    return Core(basis=q, singular_values=np.linspace(2, 1, d), mean=np.zeros(d) if mean is None else mean)


def test_keep_remove_flip_all_positions():
    core = _core()
    act = torch.randn(3, 5, 6, dtype=torch.float64)
    p = torch.as_tensor(core.projector)
    torch.testing.assert_close(intervention_hook(core, "keep")(act, None), act @ p)
    torch.testing.assert_close(intervention_hook(core, "remove")(act, None), act - act @ p)
    torch.testing.assert_close(intervention_hook(core, "flip")(act, None), act - 2 * act @ p)


def test_centred_keep_uses_the_mean():
    mu = np.arange(6.0)
    core = _core(mean=mu)
    act = torch.randn(2, 4, 6, dtype=torch.float64)
    m, p = torch.as_tensor(mu), torch.as_tensor(core.projector)
    torch.testing.assert_close(intervention_hook(core, "keep", centered=True)(act, None), m + (act - m) @ p)


def test_last_position_and_per_example_positions_touch_only_those():
    core = _core()
    act = torch.randn(3, 5, 6, dtype=torch.float64)
    out = intervention_hook(core, "remove", positions="last")(act, None)
    torch.testing.assert_close(out[:, :-1], act[:, :-1])
    assert not torch.allclose(out[:, -1], act[:, -1])
    pos = torch.tensor([0, 2, 4])
    out = intervention_hook(core, "flip", positions=pos)(act, None)
    changed = ~torch.isclose(out, act).all(-1)
    assert changed.nonzero().tolist() == [[0, 0], [1, 2], [2, 4]]


def test_bad_mode_and_positions_are_rejected():
    with pytest.raises(ValueError, match="mode must be one of"):
        intervention_hook(_core(), "erase")
    with pytest.raises(ValueError, match="positions"):
        intervention_hook(_core(), "keep", positions="first")


@pytest.fixture(scope="module")
def model_and_data():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=5, d_model=8, n_heads=2, d_ff=16, n_ctx=6)).eval()
    x = torch.randint(0, 5, (40, 6))
    y = torch.randint(0, 5, (40, 6))
    return model, x, y


def test_full_rank_keep_is_identity_and_full_rank_remove_leaves_the_bias(model_and_data):
    model, x, y = model_and_data
    d = model.cfg.d_model
    full = Core(basis=np.eye(d), singular_values=np.ones(d), mean=np.zeros(d))
    base = accuracy(model, x, y)
    with torch.no_grad():
        manual = float((model(x).argmax(-1) == y).float().mean())
    assert base == pytest.approx(manual)
    assert intervention_accuracy(model, x, y, resid_hook(0), full, "keep") == pytest.approx(base)
    # Removing every direction zeroes the block output: only the unembedding bias decides.
    constant = int(model.unembed.bias.argmax())
    expected = float((y == constant).float().mean())
    assert intervention_accuracy(model, x, y, resid_hook(0), full, "remove") == pytest.approx(expected)


def test_last_position_scoring(model_and_data):
    model, x, y = model_and_data
    with torch.no_grad():
        manual = float((model(x)[:, -1].argmax(-1) == y[:, -1]).float().mean())
    assert accuracy(model, x, y, score_positions="last") == pytest.approx(manual)


def test_accuracy_refuses_what_it_cannot_score(model_and_data):
    model, x, y = model_and_data
    with pytest.raises(ValueError, match="score_positions must be 'all' or 'last'"):
        accuracy(model, x, y, score_positions="first")
    with pytest.raises(ValueError, match=r"inputs \(40, 6\) and targets \(40, 5\) differ"):
        accuracy(model, x, y[:, :5])


def test_refine_rank_finds_known_thresholds():
    d = 40
    core = _core(d=d, r=d)
    calls = []

    def accuracy(c, mode):
        calls.append((mode, c.rank))
        r = c.rank
        return min(1.0, r / 13) if mode == "keep" else max(0.0, 1.0 - r / 16)

    necessary, sufficient = refine_rank(core, accuracy, baseline=1.0, chance_level=0.25, start_rank=3)
    assert sufficient == 13  # first r with r/13 >= 0.999
    assert necessary == 12  # first r with 1 - r/16 <= 0.25
    # The scans stop at the answer: removal is tried on 3..12 only, core-only on 1..13 only.
    assert sorted(r for m, r in calls if m == "remove") == list(range(3, 13))
    assert sorted(r for m, r in calls if m == "keep") == list(range(1, 14))


def test_refine_rank_takes_the_first_crossing_of_a_criterion_that_is_not_monotone():
    # What a trained model does: once removal has destroyed the answer, accuracy hovers around
    # the chance threshold, so the criterion holds at r = 16 but fails again at some larger r.
    # A bisection over [14, 64] probes 39 and 52 first and would report a later crossing.
    core = _core(d=64, r=64)
    removed = {r: (0.03 if r >= 16 and not 30 <= r <= 60 else 0.05) for r in range(1, 65)}
    kept = {r: (1.0 if r == 9 or r >= 12 else 0.9) for r in range(1, 65)}

    def accuracy(c, mode):
        return removed[c.rank] if mode == "remove" else kept[c.rank]

    necessary, sufficient = refine_rank(core, accuracy, baseline=1.0, chance_level=2 / 53, start_rank=14)
    assert necessary == 16
    assert sufficient == 9


def test_refine_rank_returns_none_when_unreachable():
    core = _core(d=8, r=8)
    necessary, sufficient = refine_rank(core, lambda c, m: 0.5, baseline=1.0, chance_level=0.1)
    assert necessary is None and sufficient is None


def test_ablation_curve_is_the_accuracy_at_every_rank_and_refuses_ranks_outside_the_core():
    core = _core(d=10, r=10)
    seen = []

    def accuracy(c, mode):
        seen.append(mode)
        return 1.0 / c.rank

    np.testing.assert_allclose(ablation_curve(core, accuracy, "remove"), 1.0 / np.arange(1, 11))
    np.testing.assert_allclose(ablation_curve(core, accuracy, "keep", ranks=[3, 5]), [1 / 3, 1 / 5])
    assert set(seen) == {"remove", "keep"} and len(seen) == 12
    with pytest.raises(ValueError, match=r"ranks \[0, 11\] lie outside 1..10"):
        ablation_curve(core, accuracy, "remove", ranks=[0, 5, 11])
    with pytest.raises(ValueError, match="unknown mode 'drop'"):
        ablation_curve(core, accuracy, "drop")
