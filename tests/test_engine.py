"""The vectorised multi-seed engine: same updates as separate runs, exact resume, refusals, branching."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from corelib import results
from corelib.engine import (
    DropoutStreams,
    PrefixData,
    SeedStack,
    SequenceData,
    StackConfig,
    StackOptimizer,
    bf16_native,
    epoch_order,
    load_history,
    load_snapshot,
    resolve_precision,
    snapshot_epochs,
    train_stack,
    training_seconds,
)
from corelib.fastpath import mask_feed, mask_shapes, masked_forward, prefix_last_logits, trailing_part
from corelib.models import Transformer, TransformerConfig
from corelib.results import StoreError
from corelib.tasks.modular import modular_addition_split

P = 11
CFG = TransformerConfig(vocab_size=P, d_model=32, n_heads=4, d_ff=64, n_layers=2, n_ctx=2)
SEEDS = (3, 4, 5)
DROP = replace(CFG, dropout=0.1)


def _data():
    (x, y), (xt, yt) = modular_addition_split(P, 0.5, 0)
    return (x, y), (xt, yt)


def _prefix_data():
    (x, y), (xt, yt) = _data()
    return PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)


def plain_training(model_cfg, seed, data, *, epochs, batch_size, weight_decay=0.0, positions="last", test=None):
    """The textbook PyTorch loop one seed would train with alone: the reference for the engine.

    The model's ``nn.Dropout`` layers multiply by the seed's masks (drawn for its full forward
    pass by a stream of its own, through forward hooks); the data order is ``epoch_order``.
    """
    x, y = data
    torch.manual_seed(seed)
    model = Transformer(model_cfg)
    schedule = weight_decay if callable(weight_decay) else (lambda epoch: weight_decay)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=schedule(0))
    streams = DropoutStreams(model_cfg.dropout, [seed]) if model_cfg.dropout else None
    step_masks: list[torch.Tensor] = []
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.register_forward_hook(lambda mod, inp, out: inp[0] * step_masks.pop(0) if step_masks else out)
    hist = {"loss": [], "train_acc": [], "test_acc": []}
    for epoch in range(epochs):
        opt.param_groups[0]["weight_decay"] = schedule(epoch)
        model.eval()  # nn.Dropout passes its input; the hooks apply the masks
        order = epoch_order(len(x), seed, epoch)
        total, correct, seen = 0.0, 0, 0
        for i in range(0, len(x), batch_size):
            idx = order[i : i + batch_size]
            if streams is not None:
                step_masks[:] = [m[0] for m in streams.draw(model_cfg, len(idx), x.shape[1], "cpu", last_only=False)]
            logits, target = model(x[idx]), y[idx]
            assert not step_masks, "every mask is used by the forward pass"
            if positions == "last":
                logits, target = logits[:, -1], target[:, -1]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            correct += int((logits.argmax(-1) == target).sum())
            seen += target.numel()
        hist["loss"].append(total / len(x))
        hist["train_acc"].append(correct / seen)
        if test is not None:
            with torch.no_grad():
                out = model.eval()(test[0])
            pred, want = (out[:, -1], test[1][:, -1]) if positions == "last" else (out, test[1])
            hist["test_acc"].append(float((pred.argmax(-1) == want).double().mean()))
    return model.eval(), hist


def _key_bias(name: str, d: int) -> slice | None:
    # The key bias adds the same score to every key of a query, so softmax ignores it and its
    # true gradient is exactly 0. Adam turns the rounding noise in that gradient into full-size
    # steps of either sign, so those entries (and only those) are not reproducible across two
    # mathematically equal implementations. They have no effect on any output.
    return slice(d, 2 * d) if name.endswith("attn.qkv.bias") else None


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_last_logits_equal_the_full_forward(norm):
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(vocab_size=9, d_model=16, n_heads=2, d_ff=32, n_layers=3, n_ctx=4, norm=norm)
    ).eval()
    x = torch.randint(0, 9, (50, 4))
    data = PrefixData.from_tokens(x, x)
    assert len(data.prefixes) < len(x)  # some prefixes are shared
    got = prefix_last_logits(model, data.last, data.prefixes, data.index)
    torch.testing.assert_close(got, model(x)[:, -1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(masked_forward(model, x), model(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(masked_forward(model, x, last_only=True), model(x)[:, -1], rtol=1e-5, atol=1e-6)
    few = prefix_last_logits(model, data.last[:5], data.prefixes, data.index[:5])  # fewer rows than tokens
    torch.testing.assert_close(few, model(x[:5])[:, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_cfg", [CFG, pytest.param(DROP, marks=pytest.mark.slow)], ids=["no dropout", "dropout"])
def test_stacked_seeds_get_the_updates_of_separate_runs(tmp_path, model_cfg):
    # With dropout, each seed must also see the masks of its own stream, as it would alone.
    (x, y), (xt, yt) = _data()
    decays = (1.0, 0.5, 0.0)  # one weight decay per seed
    cfg = StackConfig(epochs=4, batch_size=16, weight_decay=decays, snapshot_every=2, checkpoint_every=2)
    stack, hist = train_stack(model_cfg, cfg, SEEDS, *_prefix_data(), tmp_path / "run", progress=False)
    for i, (seed, wd) in enumerate(zip(SEEDS, decays)):
        alone, h = plain_training(model_cfg, seed, (x, y), epochs=4, batch_size=16, weight_decay=wd, test=(xt, yt))
        ref, got = alone.state_dict(), stack.model(i).state_dict()
        for name in ref:
            a, b = ref[name], got[name]
            cut = _key_bias(name, CFG.d_model)
            if cut is not None:
                a, b = torch.cat([a[: cut.start], a[cut.stop :]]), torch.cat([b[: cut.start], b[cut.stop :]])
            torch.testing.assert_close(b, a, rtol=1e-4, atol=2e-6, msg=f"seed {seed}, {name}")
        torch.testing.assert_close(stack.model(i)(xt)[:, -1], alone(xt)[:, -1], rtol=1e-4, atol=1e-5)
        assert hist["loss"][-1][i] == pytest.approx(h["loss"][-1], rel=1e-5)
        assert hist["train_acc"][-1][i] == pytest.approx(h["train_acc"][-1], abs=1e-6)
        assert hist["test_acc"][-1][i] == pytest.approx(h["test_acc"][-1], abs=1e-6)
    # Seeds really differ (a stack that trained one model three times would pass the above only by luck).
    assert not torch.equal(stack.params["embed.weight"][0], stack.params["embed.weight"][1])


@pytest.mark.parametrize(
    "model_cfg",
    [replace(CFG, vocab_size=4, n_ctx=8), replace(DROP, vocab_size=4, n_ctx=8)],
    ids=["no dropout", "dropout"],
)
@pytest.mark.slow
def test_every_position_scored_matches_the_plain_loop(tmp_path, model_cfg):
    # The Markov chapter's mode: the loss over all positions, a partial last batch, one seed or several.
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(0, 4, (70, 9), generator=g)
    x, y, xt, yt = seq[:50, :-1], seq[:50, 1:], seq[50:, :-1], seq[50:, 1:]
    cfg = StackConfig(epochs=3, batch_size=16, weight_decay=0.0, loss_positions="all", checkpoint_every=1)
    stack, hist = train_stack(
        model_cfg, cfg, (7, 8), SequenceData(x, y), SequenceData(xt, yt), tmp_path / "run", progress=False
    )
    for i, seed in enumerate((7, 8)):
        alone, h = plain_training(model_cfg, seed, (x, y), epochs=3, batch_size=16, positions="all", test=(xt, yt))
        for name, ref in alone.state_dict().items():
            a, b = ref, stack.model(i).state_dict()[name]
            cut = _key_bias(name, model_cfg.d_model)
            if cut is not None:
                a, b = torch.cat([a[: cut.start], a[cut.stop :]]), torch.cat([b[: cut.start], b[cut.stop :]])
            torch.testing.assert_close(b, a, rtol=1e-4, atol=2e-6, msg=f"seed {seed}, {name}")
        assert [row[i] for row in hist["loss"]] == pytest.approx(h["loss"], rel=1e-5)
        assert [row[i] for row in hist["train_acc"]] == pytest.approx(h["train_acc"], abs=1e-6)
        assert [row[i] for row in hist["test_acc"]] == pytest.approx(h["test_acc"], abs=1e-6)
    with pytest.raises(TypeError, match="trains on SequenceData"):
        train_stack(model_cfg, cfg, (7,), PrefixData.from_tokens(x, y), None, tmp_path / "x", progress=False)


_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.test_engine import CFG, SEEDS, _prefix_data
    from corelib.engine import StackConfig, train_stack
    train_stack(CFG, StackConfig(epochs={epochs}, batch_size=16, snapshot_every=5, checkpoint_every=5),
                SEEDS, *_prefix_data(), Path({run!r}), progress=False)
""")


def _state_epoch(run: Path) -> int:
    try:
        return int(__import__("json").loads((run / "progress.json").read_text())["state"][6:12])
    except Exception:  # not written yet, or being replaced at this instant
        return 0


@pytest.mark.slow
def test_killed_run_resumes_to_identical_results(tmp_path):
    epochs = 400
    run = tmp_path / "killed"
    root = str(Path(__file__).resolve().parent.parent)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(root=root, epochs=epochs, run=str(run))],
        cwd=root,
        env={**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())},
    )
    deadline = time.time() + 120
    while _state_epoch(run) < 10 and child.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL, "the training run finished before it could be killed"
    killed_at = _state_epoch(run)
    assert 10 <= killed_at < epochs

    cfg = StackConfig(epochs=60 + killed_at, batch_size=16, snapshot_every=5, checkpoint_every=5)
    resumed, hist_r = train_stack(CFG, cfg, SEEDS, *_prefix_data(), run, progress=False)
    whole, hist_w = train_stack(CFG, cfg, SEEDS, *_prefix_data(), tmp_path / "whole", progress=False)
    for name in whole.params:
        assert torch.equal(resumed.params[name], whole.params[name]), name
    assert hist_r == hist_w
    assert snapshot_epochs(run) == snapshot_epochs(tmp_path / "whole")


def test_training_and_resume_do_not_depend_on_the_global_torch_rng(tmp_path):
    """Data order and dropout masks are keyed by (seed, epoch, step), never drawn from torch's
    global generators: so a resume is exact on any device (a GPU's generator state is neither
    saved nor needed), and other code drawing random numbers in between changes nothing."""
    cfg = StackConfig(epochs=6, batch_size=16, snapshot_every=2, checkpoint_every=2)
    whole, hist_w = train_stack(DROP, cfg, SEEDS, *_prefix_data(), tmp_path / "whole", progress=False)
    short = StackConfig(epochs=4, batch_size=16, snapshot_every=2, checkpoint_every=2)
    train_stack(DROP, short, SEEDS, *_prefix_data(), tmp_path / "pieces", progress=False)
    torch.manual_seed(12345)
    torch.rand(1000)  # someone else's random numbers between the two processes' pieces
    resumed, hist_r = train_stack(DROP, cfg, SEEDS, *_prefix_data(), tmp_path / "pieces", progress=False)
    for name in whole.params:
        assert torch.equal(resumed.params[name], whole.params[name]), name
    assert hist_r == hist_w


def test_damaged_or_foreign_checkpoints_are_refused(tmp_path):
    cfg = StackConfig(epochs=2, batch_size=16, snapshot_every=1, checkpoint_every=1)
    train_stack(CFG, cfg, SEEDS, *_prefix_data(), tmp_path / "run", progress=False)
    other = StackConfig(epochs=2, batch_size=16, lr=3e-3, snapshot_every=1, checkpoint_every=1)
    with pytest.raises(StoreError, match="different run .*train"):
        train_stack(CFG, other, SEEDS, *_prefix_data(), tmp_path / "run", progress=False)
    with pytest.raises(StoreError, match="different run .*seeds"):
        train_stack(CFG, cfg, (3, 4), *_prefix_data(), tmp_path / "run", progress=False)

    state = next((tmp_path / "run").glob("state_*.safetensors"))
    raw = bytearray(state.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    state.write_bytes(bytes(raw))
    longer = StackConfig(epochs=3, batch_size=16, snapshot_every=1, checkpoint_every=1)
    with pytest.raises(StoreError, match="damaged"):
        train_stack(CFG, longer, SEEDS, *_prefix_data(), tmp_path / "run", progress=False)
    with pytest.raises(StoreError, match="no snapshot at epoch 7"):
        load_snapshot(tmp_path / "run", 7)


def test_a_run_holds_only_safetensors_and_json_each_covered_by_its_manifest(tmp_path):
    cfg = StackConfig(epochs=1, batch_size=16, snapshot_every=1)
    train_stack(DROP, cfg, SEEDS, *_prefix_data(), tmp_path / "run", progress=False)
    files = [f for f in (tmp_path / "run").rglob("*") if f.is_file() and not f.name.startswith(".")]
    assert {f.suffix for f in files} == {".safetensors", ".json"}
    for f in files:
        if f.name != "manifest.json":
            assert f.name in results.stored_files(f.parent), f
            (results.load_tensors if f.suffix == ".safetensors" else results.load_json)(f)


@pytest.mark.slow
def test_branch_starts_from_the_snapshot_with_a_fresh_optimizer(tmp_path):
    train, test = _prefix_data()
    src = tmp_path / "wd"
    train_stack(CFG, StackConfig(epochs=6, batch_size=16, snapshot_every=3), SEEDS, train, test, src, progress=False)
    branch_cfg = StackConfig(epochs=6, batch_size=16, weight_decay=0.0, snapshot_every=3)
    stack, hist = train_stack(CFG, branch_cfg, SEEDS, train, test, tmp_path / "no_wd", start=(src, 3), progress=False)
    assert hist["epoch"] == [4, 5, 6]
    start, source = load_snapshot(tmp_path / "no_wd", 3), load_snapshot(src, 3)
    for name in start.params:
        assert torch.equal(start.params[name], source.params[name])
    state = results.load_tensors(next((tmp_path / "no_wd").glob("state_*.safetensors")))
    steps_per_epoch = -(-len(train) // 16)
    assert float(state["optimizer.0.step"]) == 3 * steps_per_epoch  # fresh AdamW
    ended = load_snapshot(src, 6)
    assert not torch.equal(stack.params["embed.weight"], ended.params["embed.weight"])
    assert load_history(tmp_path / "no_wd")["epoch"] == [4, 5, 6]


@pytest.mark.slow
@pytest.mark.parametrize("model_cfg", [CFG, DROP], ids=["no dropout", "dropout"])
def test_extending_a_run_continues_it_and_shorter_requests_reuse_snapshots(tmp_path, model_cfg):
    # With dropout this also checks that the dropout streams are checkpointed and restored.
    train, test = _prefix_data()

    def train_to(epochs: int, folder: str):
        cfg = StackConfig(epochs=epochs, batch_size=16, snapshot_every=1)
        return train_stack(model_cfg, cfg, SEEDS, train, test, tmp_path / folder, progress=False)

    short, _ = train_to(2, "a")
    long_, hist = train_to(4, "a")  # extends the run in "a"
    direct, _ = train_to(4, "b")
    assert all(torch.equal(long_.params[k], direct.params[k]) for k in direct.params)
    again, hist2 = train_to(2, "a")  # shorter than what "a" holds: its snapshot
    assert all(torch.equal(again.params[k], short.params[k]) for k in short.params)
    assert hist2["epoch"] == [1, 2] and hist["epoch"] == [1, 2, 3, 4]


def test_masked_forward_replays_nn_dropout_and_its_last_position_pass_cuts_the_masks():
    torch.manual_seed(0)
    model = Transformer(replace(DROP, n_ctx=3)).train()
    x = torch.randint(0, P, (8, 3))
    full, last = mask_shapes(model.cfg, 8, 3), mask_shapes(model.cfg, 8, 3, last_only=True)
    assert len(full) == len(last) == 8 and full[:4] == last[:4]  # first block: all positions
    assert [tuple(s) for s in last[4:]] == [(8, 4, 1, 3), (8, 1, 32), (8, 1, 64), (8, 1, 32)]
    # nn.Dropout draws bernoulli(1 - p) masks from the global generator in forward's order.
    torch.manual_seed(11)
    reference = model(x)
    g = torch.Generator().manual_seed(11)
    masks = [torch.empty(s).bernoulli_(0.9, generator=g).div_(0.9) for s in full]
    torch.testing.assert_close(masked_forward(model, x, mask_feed(masks)), reference, rtol=1e-5, atol=1e-6)
    got = masked_forward(model, x, mask_feed([trailing_part(m, s) for m, s in zip(masks, last)]), last_only=True)
    torch.testing.assert_close(got, reference[:, -1], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, model.eval()(x)[:, -1], atol=1e-3)  # the masks did act
    with pytest.raises(ValueError, match=r"cannot cut a tensor of shape \(8, 1, 32\) down to \(8, 2, 32\)"):
        trailing_part(torch.ones(8, 1, 32), (8, 2, 32))


def test_mask_shapes_are_those_of_the_models_dropout_layers():
    model = Transformer(DROP).train()
    seen = []
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    model(torch.randint(0, P, (5, 2)))
    assert seen == mask_shapes(DROP, 5, 2)


def test_dropout_masks_must_match_the_forward_pass():
    torch.manual_seed(0)
    model = Transformer(DROP).eval()
    x = torch.randint(0, P, (8, 2))
    ones = [torch.ones(s) for s in mask_shapes(DROP, 8, 2)]
    torch.testing.assert_close(masked_forward(model, x, mask_feed(ones)), model(x))  # all-ones: eval output
    with pytest.raises(RuntimeError, match="more dropout sites than the 7 masks"):
        masked_forward(model, x, mask_feed(ones[:-1]))
    with pytest.raises(ValueError, match="sequence length 3 exceeds n_ctx=2"):
        masked_forward(model, torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="mask of shape"):
        masked_forward(model, x, mask_feed([torch.ones(3)] + ones[1:]))


def test_bad_settings_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\)"):
        TransformerConfig(vocab_size=5, d_model=8, n_heads=2, dropout=1.0)
    with pytest.raises(ValueError, match="needs the step's masks"):
        stack = SeedStack.initialise(DROP, [0])
        StackOptimizer(stack, 1e-3, 0.0).step(stack, _prefix_data()[0], torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="3 weight decays for 2 seeds"):
        StackConfig(epochs=1, weight_decay=(1.0, 0.5, 0.0)).decay(2)
    with pytest.raises(ValueError, match="T >= 2"):
        PrefixData.from_tokens(torch.zeros(4, 1, dtype=torch.long), torch.zeros(4, dtype=torch.long))


@pytest.mark.parametrize("model_cfg", [CFG, DROP], ids=["no dropout", "dropout"])
def test_a_bf16_step_takes_the_gradient_of_the_bf16_model_into_fp32_weights(model_cfg, monkeypatch):
    import corelib.precision as precision

    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: True)  # the arithmetic, emulated or not
    train, _ = _prefix_data()
    idx = torch.stack([epoch_order(len(train), s, 0)[:16] for s in SEEDS])
    stack = SeedStack.initialise(model_cfg, SEEDS, "cpu")
    before = {k: v.clone() for k, v in stack.params.items()}
    opt = StackOptimizer(stack, 1e-3, 0.0, precision="bf16")
    masks = DropoutStreams(model_cfg.dropout, SEEDS).draw(model_cfg, 16, 2, "cpu") if model_cfg.dropout else None
    losses, _ = opt.step(stack, train, idx, masks)
    assert {v.dtype for v in stack.params.values()} == {torch.float32}
    moments = [t for slot in opt.opt.state.values() for t in (slot["exp_avg"], slot["exp_avg_sq"])]
    assert {t.dtype for t in moments} == {torch.float32}
    # The gradient of seed 1 equals that of its model cast to bf16 as a whole, run by plain autograd.
    model = stack.model(1)
    model.load_state_dict({k: v[1] for k, v in before.items()})
    model = model.to(torch.bfloat16)
    x, y = train.tokens(idx[1:2])[0], train.targets[idx[1]]
    drop = None if masks is None else mask_feed([m[1] for m in masks])
    loss = F.cross_entropy(masked_forward(model, x, drop, last_only=True).float(), y)
    loss.backward()
    assert losses[1].item() == pytest.approx(loss.item(), rel=1e-2)
    # Adam's first moment after one step is (1 - beta1) g: the gradient the engine applied.
    applied = {k: opt.opt.state[v]["exp_avg"][1] / 0.1 for k, v in stack.params.items()}
    fp32 = stack.model(1)
    fp32.load_state_dict({k: v[1] for k, v in before.items()})
    drop = None if masks is None else mask_feed([m[1] for m in masks])
    F.cross_entropy(masked_forward(fp32, x, drop, last_only=True), y).backward()
    for (k, p), (_, q) in zip(model.named_parameters(), fp32.named_parameters()):
        g, g32, got = p.grad.float(), q.grad, applied[k]
        scale = g32.norm()
        assert (got - g).norm() <= 0.05 * scale, f"{k}: not the bf16 model's gradient"
        if k.endswith("weight") and g32.numel() > 100:  # the bf16 rounding is really there
            assert (got - g32).norm() > 1e-4 * scale, f"{k}: an fp32 gradient"


def test_precision_is_part_of_a_runs_identity_and_checked():
    assert "precision" not in StackConfig(epochs=1).identity()  # the default leaves keys unchanged
    assert StackConfig(epochs=1, precision="bf16").identity()["precision"] == "bf16"
    with pytest.raises(ValueError, match=r"precision must be one of \['bf16', 'fp32'\], got 'fp16'"):
        StackConfig(epochs=1, precision="fp16")


def test_training_seconds_add_up_over_the_processes_that_trained_a_run(tmp_path):
    train, test = _prefix_data()
    run = tmp_path / "run"
    cfg = StackConfig(epochs=2, batch_size=16, snapshot_every=1, checkpoint_every=1)
    assert training_seconds(run) == 0.0  # not started
    t0 = time.perf_counter()
    train_stack(CFG, cfg, SEEDS, train, test, run, progress=False)
    first = training_seconds(run)
    assert 0 < first <= time.perf_counter() - t0 + 0.1
    t0 = time.perf_counter()  # long enough to show in the tenths of a second the store keeps
    train_stack(CFG, replace(cfg, epochs=40), SEEDS, train, test, run, progress=False)
    extension = time.perf_counter() - t0
    assert training_seconds(run) > first  # the extension's time is added, not restarted
    assert training_seconds(run) - first <= extension + 0.1  # its own time, rounded to tenths


def test_bf16_is_refused_where_emulated_and_auto_picks_it_only_where_native(monkeypatch):
    import corelib.precision as precision
    from corelib.experiments.modular_runs import ModularParams
    from corelib.tasks.sweeps import SweepConfig

    stack = SeedStack.initialise(CFG, SEEDS[:1], "cpu")
    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: False)
    fix = r"would be emulated on cpu .* Use precision='fp32', or 'auto'"
    with pytest.raises(ValueError, match=fix):
        StackOptimizer(stack, 1e-3, 0.0, precision="bf16")
    monkeypatch.setenv("ACE_DEVICE", "cpu")
    for make in (ModularParams, SweepConfig):  # refused when the settings are made, before any training
        with pytest.raises(ValueError, match=fix):
            make(precision="bf16")
        assert make(precision="auto").precision == "fp32"
    assert resolve_precision("auto", "cpu") == "fp32" and resolve_precision("fp32", "cpu") == "fp32"
    assert not bf16_native("mps")  # never validated there: auto keeps fp32
    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: True)
    assert StackOptimizer(stack, 1e-3, 0.0, precision="auto").dtype == torch.bfloat16
    assert ModularParams(precision="auto").precision == "bf16"  # resolved: the run's identity says bf16
    assert ModularParams(precision="auto").training_identity() == ModularParams(precision="bf16").training_identity()
    with pytest.raises(ValueError, match=r"got 'auto' \(resolve 'auto' for a device with resolve_precision first\)"):
        StackConfig(epochs=1, precision="auto")
    with pytest.raises(ValueError, match=r"precision must be one of \['bf16', 'fp32'\], got 'fp16'"):
        resolve_precision("fp16", "cpu")


def test_a_weight_decay_schedule_equals_the_plain_loop_setting_it_each_epoch(tmp_path):
    (x, y), (xt, yt) = _data()
    knots = ((1, 1.0), (3, 0.0))  # 1 until epoch 1, down to 0 at epoch 3, then 0
    cfg = StackConfig(epochs=5, batch_size=16, weight_decay=7.0, decay_knots=knots, snapshot_every=2)
    assert [cfg.decay_at(e, 1)[0] for e in range(5)] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert "weight_decay" not in cfg.identity() and cfg.identity()["decay_knots"] == [[1, 1.0], [3, 0.0]]
    stack, _ = train_stack(CFG, cfg, SEEDS[:2], *_prefix_data(), tmp_path / "run", progress=False)
    for i, seed in enumerate(SEEDS[:2]):
        alone, _ = plain_training(
            CFG, seed, (x, y), epochs=5, batch_size=16, weight_decay=lambda e: cfg.decay_at(e, 1)[0]
        )
        torch.testing.assert_close(stack.model(i)(xt)[:, -1], alone(xt)[:, -1], rtol=1e-4, atol=1e-5)
    # The schedule depends on the epoch only: a run stopped at epoch 2 and extended is the same run.
    short = replace(cfg, epochs=2)
    train_stack(CFG, short, SEEDS[:2], *_prefix_data(), tmp_path / "pieces", progress=False)
    pieces, _ = train_stack(CFG, cfg, SEEDS[:2], *_prefix_data(), tmp_path / "pieces", progress=False)
    for name in stack.params:
        assert torch.equal(pieces.params[name], stack.params[name]), name
    flat, _ = train_stack(
        CFG, replace(cfg, decay_knots=()), SEEDS[:2], *_prefix_data(), tmp_path / "flat", progress=False
    )
    assert not torch.equal(flat.params["embed.weight"], stack.params["embed.weight"])  # 7.0 throughout differs
    with pytest.raises(ValueError, match="increasing epochs"):
        StackConfig(epochs=5, decay_knots=((3, 1.0), (1, 0.0)))


def test_a_cpu_has_bf16_only_with_its_matrix_instructions_not_by_onednns_avx512_check(monkeypatch):
    import corelib.precision as precision

    # oneDNN calls any AVX-512 CPU bf16-capable, and emulates bf16 there, slower than fp32
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    for avx512_bf16, amx in ((False, False), (True, False), (False, True)):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert precision._cpu_has_bf16() == (avx512_bf16 or amx)
        assert bf16_native("cpu") == (avx512_bf16 or amx)


def test_whole_numbers_given_as_floats_are_stored_as_ints(tmp_path):
    cfg = StackConfig(epochs=2.0, batch_size=16.0, snapshot_every=1.0, checkpoint_every=1.0, eval_every=1.0)
    for name in ("epochs", "batch_size", "snapshot_every", "checkpoint_every", "eval_every"):
        assert type(getattr(cfg, name)) is int, name
    plain = StackConfig(epochs=2, batch_size=16, snapshot_every=1, checkpoint_every=1)
    assert cfg == plain and cfg.identity() == plain.identity()
    late = StackConfig(epochs=4, snapshot_every_late=2.0, late_after=1.0)
    assert type(late.snapshot_every_late) is int and type(late.late_after) is int
    assert late.identity() == StackConfig(epochs=4, snapshot_every_late=2, late_after=1).identity()
    train_stack(CFG, cfg, (3,), *_prefix_data(), tmp_path / "run", progress=False)  # trains as epochs=2
    assert snapshot_epochs(tmp_path / "run") == [0, 1, 2]
    with pytest.raises(ValueError, match="checkpoint_every must be a whole number, got 1.5"):
        StackConfig(epochs=2, checkpoint_every=1.5)
