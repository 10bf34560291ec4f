"""The engine's dropout masks: equal to a per-element reference, Bernoulli(1 - p), independent where they must be."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from corelib.fastpath import mask_shapes, trailing_part
from corelib.masks import DropoutStreams, dropout_seed, element_bits, site_keys
from corelib.models import TransformerConfig
from corelib.results import StoreError

CFG = TransformerConfig(vocab_size=11, d_model=16, n_heads=2, d_ff=32, n_layers=2, n_ctx=4, dropout=0.1)
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


# ---------------------------------------------------------------- a per-element reference, in Python integers


def _splitmix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _lowbias32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def reference_bits(stream: int, draw: int, site: int, position: int) -> int:
    """The 32 bits (unsigned) of one mask element, computed one element at a time."""
    z = _splitmix64((stream * 0x9E3779B97F4A7C15 + draw) & M64)
    z = _splitmix64((z + (site + 1) * 0x9E3779B97F4A7C15) & M64)
    x = _lowbias32(((position * 0x9E3779B1) & M32) ^ (z & M32))
    return _lowbias32((x + (z >> 32)) & M32)


def reference_masks(p: float, seed: int, draw: int, cfg, batch: int, length: int) -> list[np.ndarray]:
    """One seed's full-pass masks at one draw, element by element."""
    threshold = round(p * 2**32)
    out = []
    for site, shape in enumerate(mask_shapes(cfg, batch, length)):
        n = int(np.prod(shape))
        bits = [reference_bits(dropout_seed(seed, 0), draw, site, i) for i in range(n)]
        out.append(np.where(np.array(bits) >= threshold, 1 / (1 - p), 0.0).reshape(shape))
    return out


def _unsigned(bits: torch.Tensor) -> np.ndarray:
    return bits.numpy().astype(np.int64) & M32


# ---------------------------------------------------------------- tests


def test_masks_equal_the_per_element_reference_for_every_seed_draw_and_site():
    streams = DropoutStreams(0.1, [3, 40])
    for draw in range(2):
        masks = streams.draw(CFG, 3, 4, "cpu", last_only=False)
        for j, seed in enumerate((3, 40)):
            for got, want in zip(masks, reference_masks(0.1, seed, draw, CFG, 3, 4)):
                np.testing.assert_allclose(got[j].numpy(), want, rtol=1e-7, atol=0)


def test_element_bits_and_keys_equal_the_reference_also_at_large_counters():
    stream, draw = dropout_seed(7, 900), 2**40 + 5  # a branch's stream, a draw beyond 32 bits
    keys = site_keys(torch.tensor([stream]), draw, 3)[:, 2]
    positions = torch.tensor([0, 1, 2**31 - 1, 123_456_789], dtype=torch.int32)
    got = _unsigned(element_bits(keys, positions))[0]
    assert got.tolist() == [reference_bits(stream, draw, 2, int(i)) for i in positions]


def test_the_last_position_pass_draws_exactly_the_elements_the_full_pass_uses():
    full = DropoutStreams(0.3, [1, 2]).draw(CFG, 5, 4, "cpu", last_only=False)
    last = DropoutStreams(0.3, [1, 2]).draw(CFG, 5, 4, "cpu", last_only=True)
    shapes = mask_shapes(CFG, 5, 4, last_only=True)
    assert [m.shape[1:] for m in last] == shapes
    for f, m, s in zip(full, last, shapes):
        assert torch.equal(trailing_part(f, (2, *s)), m)


def test_a_seed_draws_the_same_masks_alone_or_in_a_stack_and_after_a_restore():
    together = DropoutStreams(0.1, [5, 6, 7])
    alone = DropoutStreams(0.1, [6])
    for _ in range(3):
        a, b = together.draw(CFG, 4, 3, "cpu"), alone.draw(CFG, 4, 3, "cpu")
        assert all(torch.equal(x[1], y[0]) for x, y in zip(a, b))
    # A subset continues at the draw reached; a restore from state() replays nothing.
    rest = together.subset([2])
    restored = DropoutStreams(0.1, [5, 6, 7])
    restored.load_state(together.state())
    nxt = together.draw(CFG, 4, 3, "cpu")
    assert all(torch.equal(x, y) for x, y in zip(nxt, restored.draw(CFG, 4, 3, "cpu")))
    assert all(torch.equal(x[2], y[0]) for x, y in zip(nxt, rest.draw(CFG, 4, 3, "cpu")))


def test_dropout_rate_scale_and_independence():
    p, seeds = 0.1, [1031, 1032, 1033]
    cfg = replace(CFG, d_model=64, d_ff=256)
    streams = DropoutStreams(p, seeds)
    steps = [torch.cat([m.flatten(1) for m in streams.draw(cfg, 128, 4, "cpu", last_only=False)], 1) for _ in range(4)]
    flat = torch.stack(steps)  # (step, seed, element)
    torch.testing.assert_close(flat.unique(), torch.tensor([0.0, 1 / 0.9]))  # dropped, or scaled by 1/(1-p)
    kept = (flat > 0).double()
    n = kept[0, 0].numel()
    # The kept share of each seed and step: binomial, standard error sqrt(p (1 - p) / n) ~ 0.0003.
    se = (p * (1 - p) / n) ** 0.5
    assert torch.all((kept.mean(-1) - (1 - p)).abs() < 5 * se)

    # Independence: the correlation of neighbouring elements, of two seeds, of two steps is ~ N(0, 1/n).
    def corr(a, b):
        return float(np.corrcoef(a.numpy(), b.numpy())[0, 1])

    for a, b in ((kept[0, 0, :-1], kept[0, 0, 1:]), (kept[0, 0], kept[0, 1]), (kept[0, 0], kept[1, 0])):
        assert abs(corr(a, b)) < 5 / n**0.5
    # Runs of dropped elements are geometric: the test of Wald and Wolfowitz on one seed's sequence.
    x = kept[0, 0].numpy()
    runs = 1 + int(np.count_nonzero(x[1:] != x[:-1]))
    n1, n0 = x.sum(), n - x.sum()
    mean = 2 * n1 * n0 / n + 1
    var = (mean - 1) * (mean - 2) / (n - 1)
    assert abs(runs - mean) < 5 * var**0.5


def test_bits_are_uniform_in_every_byte():
    bits = _unsigned(
        element_bits(site_keys(torch.tensor([11, 12]), 0, 1)[:, 0], torch.arange(200_000, dtype=torch.int32))
    )
    for shift in (0, 8, 16, 24):
        counts = np.bincount(((bits >> shift) & 0xFF).ravel(), minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-4, f"byte at bit {shift}"


def test_a_branch_draws_other_masks_than_the_run_it_starts_from():
    start = torch.cat([m.flatten() for m in DropoutStreams(0.5, [3]).draw(CFG, 8, 4, "cpu")])
    branch = torch.cat([m.flatten() for m in DropoutStreams(0.5, [3], start_epoch=900).draw(CFG, 8, 4, "cpu")])
    assert 0.3 < (start == branch).double().mean() < 0.7  # as two independent draws at p = 0.5


def test_masks_come_in_the_requested_dtype_on_the_requested_device():
    masks = DropoutStreams(0.1, [1]).draw(CFG, 2, 3, torch.device("cpu"), dtype=torch.bfloat16)
    assert {m.dtype for m in masks} == {torch.bfloat16} and {m.device.type for m in masks} == {"cpu"}


def test_bad_settings_and_foreign_states_are_refused():
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\)"):
        DropoutStreams(1.0, [1])
    streams = DropoutStreams(0.1, [1, 2])
    with pytest.raises(StoreError, match="another mask generator"):
        streams.load_state(torch.zeros(2, 5056, dtype=torch.uint8))  # a torch generator's state
    with pytest.raises(StoreError, match="this run draws from"):
        streams.load_state(DropoutStreams(0.1, [1, 3]).state())


def test_a_dropout_rate_too_close_to_one_for_32_bit_thresholds_is_refused():
    with pytest.raises(ValueError, match=r"at most 1 - 2\*\*-33"):
        DropoutStreams(1 - 2**-34, [1])


# ---------------------------------------------------------------- the compiled (fused) drawing on the CPU


@pytest.mark.parametrize("n_seeds, n", [(1, 7), (3, 4096), (12, 3 * 512 + 5)])
def test_the_compiled_site_mask_equals_the_eager_chain_bit_for_bit(n_seeds, n):
    from corelib import masks

    keys = site_keys(torch.arange(n_seeds, dtype=torch.int64) * 977 + 5, 123_456, 1)[:, 0]
    positions = (torch.arange(n, dtype=torch.int64) * 2_654_435 % (1 << 31)).to(torch.int32)
    threshold = DropoutStreams(0.1, [0])._threshold
    eager = masks.site_mask(keys, positions, threshold, 1 / 0.9)
    fused = torch.compile(masks.site_mask, dynamic=True)(keys, positions, threshold, 1 / 0.9)
    assert torch.equal(fused, eager)
    if n > 1000:  # the mask is a dropout mask at all
        assert 0.08 < float((eager == 0).float().mean()) < 0.12


def test_masks_are_drawn_eagerly_when_compiling_fails_or_is_switched_off(monkeypatch):
    from corelib import masks

    calls = []

    def failing_compile(fn, **kwargs):
        calls.append(fn)

        def run(*args):
            raise RuntimeError("no C++ compiler")

        return run

    reference = DropoutStreams(0.1, [1, 2]).draw(CFG, 5, 4, "cpu")
    monkeypatch.setattr(torch, "compile", failing_compile)
    monkeypatch.setenv(masks.FUSED_MASKS_VARIABLE, "0")
    monkeypatch.setattr(masks, "_compiled_site_mask", None)
    off = DropoutStreams(0.1, [1, 2]).draw(CFG, 5, 4, "cpu")
    assert calls == [] and masks._compiled_site_mask is None
    monkeypatch.delenv(masks.FUSED_MASKS_VARIABLE)
    with pytest.warns(RuntimeWarning, match="compiling the dropout masks failed .*no C\\+\\+ compiler"):
        fallen_back = DropoutStreams(0.1, [1, 2]).draw(CFG, 5, 4, "cpu")
    assert len(calls) == 1 and masks._compiled_site_mask is False
    for a, b, c in zip(reference, off, fallen_back):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_a_cpu_draw_runs_the_compiled_loop_where_this_machine_compiles():
    from corelib import masks

    DropoutStreams(0.1, [1, 2, 3]).draw(CFG, 8, 4, "cpu")
    assert callable(masks._compiled_site_mask) and masks._compiled_site_mask is not masks.site_mask
