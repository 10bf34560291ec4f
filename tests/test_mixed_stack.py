"""Mixed stacks: models of one shape with their own hyperparameters trained as one stack, each bit
for bit as it trains alone (in a stack of its own arm), its run folder the one ``train_stack`` writes.

Bit identity across stacks of different sizes needs the matrix library to compute every model's
products alike whatever the batch of models; on one CPU thread it does, so these tests run on one.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from corelib.engine import (
    Arm,
    DropoutStreams,
    SeedStack,
    StackConfig,
    StackOptimizer,
    Trainer,
    train_mixed,
    train_stack,
    training_seconds,
)
from corelib.masks import site_keys
from tests.test_engine import CFG, DROP, _prefix_data

# Bit for bit: on one thread a model is computed alike in stacks of any size.
pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(epochs: int, **kw) -> StackConfig:
    return StackConfig(**{"epochs": epochs, "batch_size": 16, "snapshot_every": 2, "checkpoint_every": 2, **kw})


def _same_folder(a: Path, b: Path) -> None:
    """Two run folders hold the same files with the same bytes (the wall time in progress.json aside)."""
    names = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert names == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file() and not p.name.startswith("."))
    for name in names:
        if name.name in ("progress.json", "manifest.json"):
            x, y = json.loads((a / name).read_text()), json.loads((b / name).read_text())
            for d in (x, y):
                d.pop("seconds", None)
                d.get("files", {}).pop("progress.json", None)
                d.pop("digest", None)
            assert x == y, name
        else:
            assert (a / name).read_bytes() == (b / name).read_bytes(), f"{a.name}/{name} differs"


def _same_result(got: tuple[SeedStack, dict], want: tuple[SeedStack, dict]) -> None:
    assert got[0].seeds == want[0].seeds
    for k in want[0].params:
        assert torch.equal(got[0].params[k], want[0].params[k]), k
    assert got[1] == want[1]


@pytest.mark.parametrize("model_cfg", [CFG, DROP], ids=["no dropout", "dropout"])
def test_arms_with_their_own_rates_and_decay_schedules_train_in_one_stack_as_alone(tmp_path, model_cfg):
    arms = {
        "a": (_cfg(5, lr=1e-3, weight_decay=(1.0, 0.5)), (3, 4)),
        "b": (_cfg(5, lr=3e-3, weight_decay=0.3), (3, 5)),  # seed 3 again: same start, other settings
        "anneal": (_cfg(5, lr=7e-4, decay_knots=((1, 2.0), (3, 0.0)), snapshot_every=1), (6,)),
        "removal": (_cfg(5, lr=2e-3, decay_knots=((2, 1.0), (3, 0.0)), eval_every=2), (7, 8)),  # none from epoch 3
    }
    mixed = train_mixed(
        model_cfg, [Arm(c, s, tmp_path / "mixed" / n) for n, (c, s) in arms.items()], *_prefix_data(), progress=False
    )
    for (name, (cfg, seeds)), got in zip(arms.items(), mixed):
        alone = train_stack(model_cfg, cfg, seeds, *_prefix_data(), tmp_path / "alone" / name, progress=False)
        _same_result(got, alone)
        _same_folder(tmp_path / "mixed" / name, tmp_path / "alone" / name)  # weights, AdamW, dropout streams
    # The settings acted: seed 3 ends elsewhere under each arm's rate and decay.
    assert not torch.equal(mixed[0][0].params["embed.weight"][0], mixed[1][0].params["embed.weight"][0])


def test_branches_join_at_their_epoch_and_arms_stop_at_their_own(tmp_path):
    def arms(root: Path) -> list[Arm]:
        return [
            Arm(_cfg(6), (3, 4), root / "wd"),
            Arm(_cfg(6, weight_decay=0.0), (3, 4), root / "removed", start=(root / "wd", 2)),
            Arm(_cfg(7, decay_knots=((4, 1.0), (6, 0.0))), (3, 4), root / "annealed", start=(root / "wd", 4)),
            Arm(_cfg(3, lr=2e-3), (5,), root / "short"),
        ]

    mixed = train_mixed(DROP, arms(tmp_path / "mixed"), *_prefix_data(), progress=False)
    assert [h["epoch"][0] for _, h in mixed] == [1, 3, 5, 1] and [h["epoch"][-1] for _, h in mixed] == [6, 6, 7, 3]
    for arm, got in zip(arms(tmp_path / "alone"), mixed):  # one train_stack after another, as the chapters do
        _same_result(got, train_stack(DROP, arm.cfg, arm.seeds, *_prefix_data(), arm.run_dir, start=arm.start,
                                      progress=False))  # fmt: skip
        _same_folder(tmp_path / "mixed" / arm.run_dir.name, arm.run_dir)


def test_a_mixed_run_resumes_its_arms_from_the_epochs_each_reached(tmp_path):
    train, test = _prefix_data()

    def arms(root: Path, short: int, long: int) -> list[Arm]:
        return [Arm(_cfg(short, lr=2e-3), (3, 4), root / "a"), Arm(_cfg(long, weight_decay=0.2), (5,), root / "b")]

    train_mixed(DROP, arms(tmp_path / "pieces", 2, 4), train, test, progress=False)
    # "a" resumes at epoch 2 and trains alone until "b" joins it at epoch 4, with its streams at other draws.
    resumed = train_mixed(DROP, arms(tmp_path / "pieces", 6, 6), train, test, progress=False)
    whole = train_mixed(DROP, arms(tmp_path / "whole", 6, 6), train, test, progress=False)
    for name, got, want in zip("ab", resumed, whole):
        _same_result(got, want)
        _same_folder(tmp_path / "pieces" / name, tmp_path / "whole" / name)
    # An arm's folder is a train_stack run: extended alone, it continues as it would have in the stack.
    extended = train_stack(DROP, _cfg(8, lr=2e-3), (3, 4), train, test, tmp_path / "pieces" / "a", progress=False)
    again = train_mixed(DROP, arms(tmp_path / "whole", 8, 6), train, test, progress=False)[0]
    _same_result(extended, again)
    shorter = train_mixed(DROP, arms(tmp_path / "whole", 4, 6), train, test, progress=False)  # its snapshots
    assert shorter[0][1]["epoch"] == [1, 2, 3, 4] and shorter[1][1] == whole[1][1]


@pytest.mark.parametrize("model_cfg", [CFG, DROP], ids=["no dropout", "dropout"])
def test_groups_of_a_trainer_stop_their_seeds_by_their_own_rule_as_alone(model_cfg):
    # The grokking sweeps' way: seeds leave the stack after any step; here at a step given per seed.
    train, _ = _prefix_data()
    groups = {"wd 1": ((3, 4, 5), 1e-3, 1.0, {4: 5}), "wd 0.3": ((3, 6), 3e-3, 0.3, {3: 2, 6: 9})}

    def run(names: list[str]) -> dict:
        stops, left = {}, {}
        trainer = None
        for name in names:
            seeds, lr, wd, stop = groups[name]
            stops.update({(name, s): step for s, step in stop.items()})
            stack = SeedStack.initialise(model_cfg, seeds, "cpu")
            streams = DropoutStreams(model_cfg.dropout, seeds) if model_cfg.dropout else None
            if trainer is None:
                trainer = Trainer(stack, train, lr=lr, weight_decay=wd, batch_size=16, streams=streams, name=name)
            else:
                trainer.join(stack, lr=lr, weight_decay=wd, streams=streams, name=name)

        def on_step(tr: Trainer, step: int, idx, logits) -> bool:
            owners = [(n, tr.stack.seeds[j]) for n, span in tr.opt.spans.items() for j in span]
            done = [j for j, key in enumerate(owners) if stops.get(key) == step]
            for j in done:
                left[owners[j]] = {k: v[j].detach().clone() for k, v in tr.stack.params.items()}
            if len(done) == len(owners):
                return True  # the last seeds: training ends
            if done:
                tr.drop(done)
            return False

        for epoch in range(3):
            if trainer.epoch(epoch, on_step) is None:
                return left
        spans = trainer.opt.spans
        left.update({(n, trainer.stack.seeds[j]): {k: v[j] for k, v in trainer.stack.params.items()}
                     for n in spans for j in spans[n]})  # fmt: skip
        return left

    together = run(list(groups))
    apart = {**run(["wd 1"]), **run(["wd 0.3"])}
    assert together.keys() == apart.keys() and len(together) == 5
    for key, weights in apart.items():
        for k, v in weights.items():
            assert torch.equal(together[key][k], v), (key, k)


def test_a_groups_optimizer_is_the_optimizer_it_has_alone():
    # AdamW's fused kernel treats a tensor's last (numel mod vector width) elements apart: an output
    # bias of 11 per model puts each group's tail elsewhere in a stack than alone. (On the CPU that
    # wrote this test, one AdamW over the whole stack differs from the groups' own in the first steps.)
    cfg = CFG
    lrs, decays = (1e-3, 3e-3, 7e-4), ((1.0, 0.0), (0.3,), (2.0, 1.0, 0.5))
    parts = [SeedStack.initialise(cfg, range(i, i + len(d)), "cpu") for i, d in enumerate(decays)]
    alone = [StackOptimizer(p, lr, d) for p, lr, d in zip(parts, lrs, decays)]
    current = SeedStack.joined(parts[:1])
    stacked_opt = StackOptimizer(current, lrs[0], decays[0], name=0)
    for i in (1, 2):  # each group joins as a group of its own
        current = SeedStack.joined([current, parts[i]])
        stacked_opt = stacked_opt.joined(current, lrs[i], decays[i], name=i)
    trainer_grads = torch.Generator().manual_seed(0)
    assert stacked_opt.spans == {0: range(0, 2), 1: range(2, 3), 2: range(3, 6)}
    for _ in range(8):
        noise = {k: torch.randn(v.shape, generator=trainer_grads) for k, v in current.params.items()}
        for k, v in current.params.items():
            v.grad = noise[k].clone()
        _apply(stacked_opt, current)
        for (part, o), span in zip(zip(parts, alone), stacked_opt.spans.values()):
            for k, v in part.params.items():
                v.grad = noise[k][span.start : span.stop].clone()
            _apply(o, part)
    for (part, o), name in zip(zip(parts, alone), stacked_opt.spans):
        span = stacked_opt.spans[name]
        for k, v in part.params.items():
            assert torch.equal(current.params[k][span.start : span.stop], v), (name, k)
        mixed_state, alone_state = stacked_opt.tensors(name)[0], o.tensors()[0]
        assert mixed_state.keys() == alone_state.keys()
        assert all(torch.equal(mixed_state[k], alone_state[k]) for k in alone_state), name
    with pytest.raises(ValueError, match="3 groups"):
        stacked_opt.tensors()
    with pytest.raises(ValueError, match="would mix the groups"):
        stacked_opt.subset(current.subset([2, 0]), [2, 0])


def _apply(opt: StackOptimizer, stack: SeedStack) -> None:
    """The update half of :meth:`StackOptimizer.step` on gradients set by hand."""
    with torch.no_grad():
        for k, p in stack.params.items():
            p.mul_(opt.shrink[k])
    for group in opt.groups:
        if group.views is not None:
            for view, p in zip(group.views, stack.params.values()):
                view.grad = p.grad[group.start : group.start + group.size]
        group.opt.step()


def test_streams_that_joined_at_other_steps_draw_as_they_would_alone():
    early, late = DropoutStreams(0.1, [5, 6]), DropoutStreams(0.1, [6], start_epoch=900)
    for _ in range(3):
        early.draw(CFG, 4, 2, "cpu")
    joined = DropoutStreams.joined([early, late])
    alone_early, alone_late = DropoutStreams(0.1, [5, 6]), DropoutStreams(0.1, [6], start_epoch=900)
    alone_early.load_state(early.state())
    got = joined.draw(CFG, 4, 2, "cpu")
    for mixed, a, b in zip(got, alone_early.draw(CFG, 4, 2, "cpu"), alone_late.draw(CFG, 4, 2, "cpu")):
        assert torch.equal(mixed[:2], a) and torch.equal(mixed[2:], b)
    assert joined.state()[:, 1].tolist() == [4, 4, 1]
    restored = DropoutStreams.joined([DropoutStreams(0.1, [5, 6]), DropoutStreams(0.1, [6], start_epoch=900)])
    restored.load_state(joined.state())
    assert all(torch.equal(x, y) for x, y in zip(restored.draw(CFG, 4, 2, "cpu"), joined.draw(CFG, 4, 2, "cpu")))
    streams = torch.tensor([7, 8])
    assert torch.equal(site_keys(streams, 3, 2, torch.tensor([0, 2]))[1], site_keys(streams[1:], 5, 2)[0])
    with pytest.raises(ValueError, match="cannot be joined"):
        DropoutStreams.joined([early, DropoutStreams(0.2, [1])])


def test_arms_that_cannot_share_a_stack_are_refused_with_the_fix(tmp_path):
    train, test = _prefix_data()
    a = Arm(_cfg(2), (3,), tmp_path / "a")
    with pytest.raises(ValueError, match="differs from the first in batch_size, .* separate calls"):
        train_mixed(CFG, [a, Arm(_cfg(2, batch_size=8), (4,), tmp_path / "b")], train, test, progress=False)
    with pytest.raises(ValueError, match="share a run folder"):
        train_mixed(CFG, [a, Arm(_cfg(3, lr=2e-3), (4,), tmp_path / "a")], train, test, progress=False)
    with pytest.raises(Exception, match="holds no run; train that run first, or list the arm"):
        branch_first = [
            Arm(_cfg(4), (3,), tmp_path / "c", start=(tmp_path / "d", 2)),
            Arm(_cfg(4), (3,), tmp_path / "d"),
        ]
        train_mixed(CFG, branch_first, train, test, progress=False)
    with pytest.raises(ValueError, match="at least one seed"):
        Arm(_cfg(2), (), tmp_path / "e")
    trainer = Trainer(SeedStack.initialise(CFG, [1], "cpu"), train, lr=1e-3, weight_decay=0.0, batch_size=16)
    with pytest.raises(ValueError, match="another architecture"):
        trainer.join(SeedStack.initialise(replace(CFG, d_ff=32), [2], "cpu"), lr=1e-3, weight_decay=0.0, name=1)
    with pytest.raises(ValueError, match="whole stack"):
        trainer.leave(0)


def test_uniform_settings_keep_their_run_identity():
    # The keys of every stored run: the settings a uniform stack has always had, and nothing new.
    assert StackConfig(epochs=3).identity() == {
        "batch_size": 512,
        "lr": 1e-3,
        "weight_decay": 1.0,
        "snapshot_every": 100,
        "snapshot_every_late": None,
        "late_after": None,
        "checkpoint_every": 100,
    }


def test_the_arms_of_a_stack_share_its_wall_time_by_their_models(tmp_path):
    # Each arm's seconds are its share of the stack's time, so the sum over arms is the stack's
    # wall time (not once per arm). Compared with the time measured around the call; no speed limit.
    train, test = _prefix_data()
    arms = [Arm(_cfg(30, lr=lr), seeds, tmp_path / name) for name, lr, seeds in
            (("a", 1e-3, (3,)), ("b", 2e-3, (4, 5)), ("c", 3e-3, (6,)))]  # fmt: skip
    t0 = time.perf_counter()
    train_mixed(CFG, arms, train, test, progress=False)
    total = time.perf_counter() - t0
    shares = [training_seconds(arm.run_dir) for arm in arms]
    assert sum(shares) <= total + 0.2, (shares, total)  # three arms' wall time would be about 3 x total
    assert sum(shares) >= 0.5 * total, (shares, total)  # the training is most of the call
    assert shares[1] > 0.5 * (shares[0] + shares[2])  # two models of four: about as much as the other two


def test_positions_outside_the_optimizer_and_models_on_another_device_are_refused():
    parts = [SeedStack.initialise(CFG, [i], "cpu") for i in (1, 2)]
    stack = SeedStack.joined(parts)
    opt = StackOptimizer(stack, 1e-3, 0.0)
    with pytest.raises(ValueError, match=r"positions \[5\] are in no group of this optimizer"):
        opt.subset(stack.subset([0]), [0, 5])
    train, _ = _prefix_data()
    trainer = Trainer(parts[0], train, lr=1e-3, weight_decay=0.0, batch_size=16)
    elsewhere = SeedStack(CFG, [2], {k: v.to("meta") for k, v in parts[1].params.items()})
    with pytest.raises(ValueError, match="joining models are on meta, this stack's on cpu"):
        trainer.join(elsewhere, lr=1e-3, weight_decay=0.0, name=1)
