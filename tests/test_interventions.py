"""Interventions: hook algebra on known cores, through a real hooked model, and rank refinement."""

from functools import partial

import numpy as np
import pytest
import torch

from corelib.ace import Core
from corelib.interventions import (
    ReadoutAccuracy,
    ablation_curve,
    accuracy,
    intervention_accuracy,
    intervention_hook,
    rank_accuracies,
    rank_interventions,
    refine_rank,
)
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


# --------------------------------------------------------------------------- rank scans batched over ranks


@pytest.fixture(scope="module", params=["post", "pre"])
def two_block_model(request):
    """A random two-block model (pre-norm: a final LayerNorm after the hook), a core of its last
    block's output with a non-zero mean, and data scored at the last position."""
    torch.manual_seed(1)
    cfg = TransformerConfig(vocab_size=7, d_model=12, n_heads=2, d_ff=24, n_layers=2, n_ctx=4, norm=request.param)
    model = Transformer(cfg).eval()
    x, y = torch.randint(0, 7, (300, 3)), torch.randint(0, 7, (300, 3))
    _, cache = model.run_with_cache(x, names_filter=resid_hook(1))
    h = cache[resid_hook(1)][:, -1]
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(12, 12)))
    core = Core(basis=q, singular_values=np.linspace(2, 1, 12), mean=h.double().mean(0).numpy())
    return model, x, y, h, core


def _hooked_last(model, x, core, mode, centered):
    """The hooked model run's logits at the last position."""
    hook = intervention_hook(core, mode, centered=centered, positions="last")
    with torch.no_grad():
        return model.run_with_hooks(x, fwd_hooks=[(resid_hook(1), hook)])[:, -1]


@pytest.mark.parametrize("mode", ["keep", "remove", "flip"])
@pytest.mark.parametrize("centered", [False, True])
def test_rank_accuracies_are_the_hooked_runs_at_every_rank(two_block_model, mode, centered):
    model, x, y, h, core = two_block_model
    unembed = partial(model, start_at_layer=2)
    ranks = range(1, 13)
    batches = list(rank_interventions(core, mode, h, ranks, centered=centered, chunk=5))
    assert [b.shape for b in batches] == [(5, 300, 12), (5, 300, 12), (2, 300, 12)]
    activations = torch.cat(batches)
    batched = rank_accuracies(core, mode, h, y[:, -1], unembed, ranks, centered=centered, chunk=5)
    for r in ranks:
        truncated = core.truncate(r)
        torch.testing.assert_close(activations[r - 1], getattr(truncated, mode)(h, centered=centered))
        logits = _hooked_last(model, x, truncated, mode, centered)
        # Removing every direction leaves only rounding (float32's in the hook, float64's here),
        # which a final LayerNorm scales up to the logits' size: there the logits are noise.
        if not (mode == "remove" and r == core.rank and model.cfg.norm == "pre"):
            torch.testing.assert_close(unembed(activations[r - 1]), logits, rtol=1e-4, atol=1e-4)
        hooked = intervention_accuracy(
            model, x, y, resid_hook(1), truncated, mode, positions="last", score_positions="last", centered=centered
        )
        # The two computations round differently (float64 projections built rank by rank, against
        # the hook's float32 ones): only an example whose two best logits lie within ten times the
        # tolerance above may be scored differently.
        top2 = logits.topk(2).values
        ties = int((top2[:, 0] - top2[:, 1] < 1e-3).sum())
        assert abs(batched[r - 1] - hooked) * len(x) <= ties, (r, batched[r - 1], hooked)


def test_rank_accuracies_take_ranks_in_any_order_and_refuse_what_they_cannot_do(two_block_model):
    model, x, y, h, core = two_block_model
    unembed = partial(model, start_at_layer=2)
    every = rank_accuracies(core, "remove", h, y[:, -1], unembed, range(1, 13))
    np.testing.assert_array_equal(
        rank_accuracies(core, "remove", h, y[:, -1], unembed, [9, 2, 12, 2], chunk=3), every[[8, 1, 11, 1]]
    )
    assert rank_accuracies(core, "keep", h, y[:, -1], unembed, []).shape == (0,)
    with pytest.raises(ValueError, match="ascending"):
        rank_interventions(core, "keep", h, [3, 2])
    with pytest.raises(ValueError, match=r"ranks \[13\] lie outside 1..12"):
        rank_interventions(core, "keep", h, [1, 13])
    with pytest.raises(ValueError, match="chunk must be a positive"):
        rank_interventions(core, "keep", h, [1], chunk=0)
    with pytest.raises(ValueError, match=r"h must be \(N, 12\)"):
        rank_interventions(core, "keep", h[:, :5], [1])
    with pytest.raises(ValueError, match="targets must be"):
        rank_accuracies(core, "keep", h, y, unembed, [1])


def test_scans_and_curves_batched_over_ranks_are_those_of_the_hooked_runs(two_block_model):
    model, x, y, h, core = two_block_model

    def hooked(c, mode):
        return intervention_accuracy(model, x, y, resid_hook(1), c, mode, positions="last", score_positions="last")

    batched = ReadoutAccuracy(h, y[:, -1], partial(model, start_at_layer=2), ranks_per_batch=5)
    curves = {mode: ablation_curve(core, hooked, mode) for mode in ("keep", "remove")}
    for mode in ("keep", "remove"):
        np.testing.assert_array_equal(ablation_curve(core, batched, mode), curves[mode])
        assert batched(core.truncate(7), mode) == hooked(core.truncate(7), mode)
    # Criteria that first hold inside the scans (not at their first rank), at every batch size.
    chance = float(np.sort(curves["remove"][3:])[2])
    baseline = float(np.sort(curves["keep"])[-3]) + 0.001
    expected = refine_rank(core, hooked, baseline=baseline, chance_level=chance, start_rank=4)
    assert expected[0] > 4 and expected[1] > 1
    for step in (1, 2, 5, 12):
        found = refine_rank(
            core,
            ReadoutAccuracy(**{**batched.__dict__, "ranks_per_batch": step}),
            baseline=baseline,
            chance_level=chance,
            start_rank=4,
        )
        assert found == expected


class _Scripted:
    """An accuracy batched over ranks, read from tables; records the ranks it was asked for."""

    def __init__(self, removed: dict, kept: dict, ranks_per_batch: int):
        self.tables = {"remove": removed, "keep": kept}
        self.ranks_per_batch = ranks_per_batch
        self.asked = []

    def __call__(self, core, mode):
        raise AssertionError("the scans should ask over_ranks")

    def over_ranks(self, full_core, mode, ranks):
        self.asked.append((mode, list(ranks)))
        return np.array([self.tables[mode][r] for r in ranks])


def test_refine_rank_scans_a_batched_accuracy_block_by_block_to_the_first_crossing():
    core = _core(d=64, r=64)
    removed = {r: (0.03 if r >= 16 and not 30 <= r <= 60 else 0.05) for r in range(1, 65)}
    removed[21] = 0.01  # a later, deeper crossing in the same block does not win
    kept = {r: (1.0 if r == 9 or r >= 12 else 0.9) for r in range(1, 65)}
    scripted = _Scripted(removed, kept, ranks_per_batch=5)
    assert refine_rank(core, scripted, baseline=1.0, chance_level=2 / 53, start_rank=14) == (16, 9)
    assert scripted.asked == [
        ("remove", [14, 15, 16, 17, 18]),
        ("keep", [1, 2, 3, 4, 5]),
        ("keep", [6, 7, 8, 9, 10]),
    ]
    unreachable = _Scripted(dict.fromkeys(range(1, 65), 0.5), dict.fromkeys(range(1, 65), 0.5), 10)
    assert refine_rank(core, unreachable, baseline=1.0, chance_level=0.1, start_rank=60) == (None, None)
    assert unreachable.asked[0] == ("remove", [60, 61, 62, 63, 64]) and unreachable.asked[-1][1][-1] == 64
    np.testing.assert_array_equal(ablation_curve(core, scripted, "remove", ranks=[3, 16]), [0.05, 0.03])
