"""The benchmark scripts: their FLOP counter gives known counts, their authors'-style model is our
model's architecture, and the scripts run to the end, printing their ratios and ceilings."""

import contextlib
import io
import os
import re
import runpy
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _machine  # noqa: E402
from _machine import ReferenceModel, counted_flops, mask_seconds, reference_model  # noqa: E402
from corelib.engine import bf16_native  # noqa: E402
from corelib.experiments.modular_runs import ModularParams  # noqa: E402
from corelib.models import Transformer, TransformerConfig  # noqa: E402
from corelib.tasks.sweeps import SweepConfig  # noqa: E402


@dataclass
class ScriptRun:
    returncode: int
    stdout: str
    stderr: str


def run_script(script: str, *args: str, env: dict[str, str] | None = None) -> ScriptRun:
    """Run ``benchmarks/<script>`` with ``args`` as its ``__main__``, in this process.

    The test process has already loaded torch and the project, so a run here spares the several
    seconds of imports a new interpreter pays; ``sys.argv``, ``sys.path``, the environment variables,
    torch's random state and its thread count are put back afterwards. One test still starts a script
    in a new interpreter (:func:`test_sweep_benchmark_refuses_a_single_step`).
    """
    path = ROOT / "benchmarks" / script
    env = env or {}
    saved = {name: os.environ.get(name) for name in {"ACE_DEVICE", *env}}  # the scripts may set ACE_DEVICE
    argv, search_path, threads, code = sys.argv, sys.path[:], torch.get_num_threads(), 0
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env)
        sys.argv = [str(path), *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), torch.random.fork_rng(devices=[]):
            try:
                runpy.run_path(str(path), run_name="__main__")
            except SystemExit as stop:
                if stop.code is not None and not isinstance(stop.code, int):  # sys.exit("message")
                    print(stop.code, file=sys.stderr)
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.argv, sys.path[:] = argv, search_path
        torch.set_num_threads(threads)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return ScriptRun(code, out.getvalue(), err.getvalue())


def test_counted_flops_are_those_of_the_matmuls_run_also_under_vmap():
    a, b = torch.randn(6, 5), torch.randn(5, 7)
    assert counted_flops(lambda: a @ b) == 2 * 6 * 5 * 7
    assert counted_flops(lambda: (a @ b, torch.relu(a), a + 1)) == 2 * 6 * 5 * 7  # elementwise work is not counted
    stacked = torch.randn(4, 6, 5)
    assert counted_flops(lambda: torch.vmap(lambda x: x @ b)(stacked)) == 4 * 2 * 6 * 5 * 7
    w = torch.randn(3, 5, requires_grad=True)
    # backward of x @ w.T: one matmul for the gradient of w (x is not a leaf that needs one)
    assert counted_flops(lambda: (a @ w.T).sum().backward()) == 2 * (2 * 6 * 5 * 3)


def test_counted_flops_see_the_encoder_layers_fused_kernels():
    torch.manual_seed(0)
    model = ReferenceModel(11, 1, d_model=8, n_heads=2, d_ff=16, dropout=0.0)
    b, t, d, d_ff, vocab = 5, 3, 8, 16, 11
    x = torch.randint(0, vocab, (b, t))
    # per token: in-projection, out-projection, MLP, read-out; per sequence: scores and mixing
    expected = b * t * (2 * d * 3 * d + 2 * d * d + 2 * 2 * d * d_ff + 2 * d * vocab) + b * 2 * (2 * t * t * d)
    with torch.no_grad():
        assert counted_flops(lambda: model.eval()(x)) == expected  # the fused inference kernel, unfused to count
        assert counted_flops(lambda: model.train()(x)) == expected  # the CPU flash-attention kernel
    assert torch.backends.mha.get_fastpath_enabled()  # switched back on after counting


@pytest.mark.parametrize(
    "cfg", [ModularParams().model_config(), SweepConfig().model_config(53)], ids=["modular", "sweeps"]
)
def test_reference_model_has_the_parameters_of_our_model(cfg):
    ref = reference_model(cfg.vocab_size, cfg.n_layers, cfg.dropout)
    ours = Transformer(cfg)

    def count(model):
        return sum(p.numel() for p in model.parameters())

    assert count(ref) == count(ours) == {1: 220_085, 2: 418_357}[cfg.n_layers]
    assert sorted(p.shape for p in ref.parameters()) == sorted(p.shape for p in ours.parameters())
    for layer in ref.layers:
        assert not layer.norm_first and layer.linear1.out_features == cfg.d_ff == 512
        assert layer.self_attn.num_heads == cfg.n_heads and layer.dropout.p == cfg.dropout


class _Ops(TorchDispatchMode):
    """Records the names of the operations dispatched."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_reference_model_is_causal_and_evaluates_through_the_fused_kernel():
    torch.manual_seed(0)
    model = ReferenceModel(11, 2, d_model=8, n_heads=2, d_ff=16).eval()
    x = torch.randint(0, 11, (4, 5))
    changed = x.clone()
    changed[:, 2] = (changed[:, 2] + 1) % 11
    with torch.no_grad(), _Ops() as ops:
        a, b = model(x), model(changed)
    torch.testing.assert_close(a[:, :2], b[:, :2])  # earlier positions do not see the change
    assert not torch.allclose(a[:, 2:], b[:, 2:], atol=1e-4)
    assert ops.names.count("_transformer_encoder_layer_fwd") == 4  # two layers, two forwards
    with _Ops() as ops:
        model.train()(x)
    assert "_transformer_encoder_layer_fwd" not in ops.names


@pytest.mark.slow  # times the masks of a benchmark
def test_mask_seconds_times_the_draws_of_every_batch_for_all_seeds(monkeypatch):
    cfg = TransformerConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, dropout=0.1)
    drawn = []
    real_draw = _machine.DropoutStreams.draw

    def draw(self, model_cfg, batch, length, device):
        drawn.append((len(self), batch, length))
        return real_draw(self, model_cfg, batch, length, device)

    monkeypatch.setattr(_machine.DropoutStreams, "draw", draw)
    assert mask_seconds(cfg, [1, 2], [16, 4], 3, repeats=2) > 0
    assert drawn == [(2, 16, 3), (2, 4, 3)] * 2


_SIDE = re.compile(r"^(.+?)\s*: +([\d.]+) seed-\w+/s, +([\d.]+) GFLOP per seed-\w+, +([\d.]+) GFLOP/s", re.M)
_RATIO = re.compile(
    r"^speed-up over the (authors'|in-house) loop: ([\d.]+)x(?:  \(target >= ([\d.]+)x\))?; GFLOP/s: "
    r"engine ([\d.]+) \([\d.]+% of peak\), \1 loop ([\d.]+) \([\d.]+% of peak\)$",
    re.M,
)


def _check_report(out: str, targets: dict) -> None:
    """Every side's rate and GFLOP/s, and the ratios computed from them, with their targets."""
    sides = {}
    for label, rate, gflop, gflops in _SIDE.findall(out):
        name = "authors'" if label.startswith("authors'") else "in-house" if label.startswith("in-house") else "engine"
        name += " bf16" if label.endswith("bf16") or label.endswith("bf16 training") else ""
        sides[name] = float(rate), float(gflops)
        assert float(gflops) == pytest.approx(float(rate) * float(gflop), rel=0.1, abs=0.1), label
        assert float(rate) > 0 and float(gflop) > 0, label
    native = {"engine bf16"} if bf16_native("cpu") else set()  # elsewhere the engine refuses bf16
    assert set(sides) == {"authors'", "in-house", "engine"} | native, out
    ratios = _RATIO.findall(out)
    assert {r[0] for r in ratios} == {"authors'", "in-house"}, out
    for name, ratio, target, engine_gflops, side_gflops in ratios:
        assert float(ratio) == pytest.approx(sides["engine"][0] / sides[name][0], rel=0.15, abs=0.1), name
        assert float(engine_gflops) == pytest.approx(sides["engine"][1], abs=0.01)
        assert float(side_gflops) == pytest.approx(sides[name][1], abs=0.01)
        assert target == targets[name], name
    assert "the engine's ceiling here" in out and "over the authors' loop" in out
    if not native:
        assert "bf16: not timed: this CPU would emulate it" in out
        return
    gain = re.search(r"^bf16: ([\d.]+)x the engine's fp32 rate", out, re.M)
    assert gain and float(gain[1]) == pytest.approx(sides["engine bf16"][0] / sides["engine"][0], rel=0.15, abs=0.02)


@pytest.mark.parametrize(
    "script, args, targets",
    [
        pytest.param(
            "train_throughput.py",
            ["--epochs", "1", "--repeats", "2", "--seeds", "1031", "1032"],
            {"authors'": "1.5", "in-house": ""},
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "sweep_throughput.py",
            ["--steps", "8", "--seeds", "2", "--plain-seeds", "1"],  # 7 steps over the noise of fixed costs
            {"authors'": "4.5", "in-house": "10"},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_benchmark_scripts_print_their_ratios_and_ceiling(script, args, targets):
    run = run_script(script, *args)
    assert run.returncode == 0, run.stderr[-2000:]
    _check_report(run.stdout, targets)
    if "--repeats" in args:  # each round's ratio beside the medians
        rounds = re.search(r"in each of the (\d+) rounds: (.+) \(medians above\)$", run.stdout, re.M)
        n = int(args[args.index("--repeats") + 1])
        assert rounds and int(rounds[1]) == n and len(re.findall(r"[\d.]+x", rounds[2])) == n, run.stdout


@pytest.mark.slow
def test_sweep_benchmark_refuses_a_single_step():
    # in a new interpreter, as a reader runs it: the script finds its imports from anywhere
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sweep_throughput.py"), "--steps", "1"],
        cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 2 and "--steps must be at least 2" in run.stderr


def test_bf16_fidelity_compares_samples_by_cliffs_delta_consistent_with_mann_whitney():
    from scipy import stats

    from bf16_fidelity import cliffs_delta, compare

    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 12), rng.normal(0.0, 1.0, 12)
    u = stats.mannwhitneyu(a, b).statistic
    assert cliffs_delta(a, b) == pytest.approx(2 * u / (len(a) * len(b)) - 1)  # no ties: the rank-biserial r
    assert cliffs_delta(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    fp32 = [{"t_mem": 10 + i, "t_gen": 100 + i, "delay": 90} for i in range(4)]
    bf16 = [{"t_mem": 10 + i, "t_gen": None, "delay": None} for i in range(4)]
    out = compare(fp32, bf16)
    assert out["t_mem"]["cliffs_delta"] == 0.0 and out["t_mem"]["p"] == pytest.approx(1.0)
    assert out["t_gen"] == {"n_bf16": 0, "n_fp32": 4}  # no test without values


def test_bf16_fidelity_reads_the_first_epoch_at_a_threshold_skipping_unmeasured_ones():
    from bf16_fidelity import _first_epoch

    assert _first_epoch([10, 20, 30, 40], [0.5, None, 0.995, 1.0], 0.99) == 30
    assert _first_epoch([10, 20], [None, 0.9], 0.99) is None


@pytest.mark.slow
def test_rank_scan_benchmark_prints_its_speed_up():
    run = run_script("rank_scan.py", "--curve-step", "32", "--repeats", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "speed-up: analyse_model" in run.stdout


def test_the_engine_profile_groups_operators_by_kind():
    import profile_engine

    kinds = {
        "aten::bmm": "matmul",
        "aten::addmm": "matmul",
        "aten::_softmax_backward_data": "attention softmax",
        "aten::native_layer_norm": "layer norm",
        "aten::_fused_adamw_": "optimizer",
        "aten::bitwise_right_shift": "masks",
        "aten::__ixor__": "masks",
        "aten::copy_": "copies and shapes",
        "aten::as_strided": "copies and shapes",
        "aten::mul": "elementwise",
        "aten::threshold_backward": "elementwise",
    }
    assert {name: profile_engine.group_of(name) for name in kinds} == kinds


@pytest.mark.slow
def test_the_engine_profile_accounts_for_the_wall_time():
    run = run_script("profile_engine.py", "--epochs", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    shares = [float(s) for s in re.findall(r"ms per seed-epoch\s+([\d.]+)%", run.stdout)]
    assert len(shares) >= 6 and sum(shares) == pytest.approx(100, abs=1.0), run.stdout


def _fidelity_records() -> list:
    return sorted((ROOT / "recorded").glob("bf16_fidelity_*.json"))


def test_bf16_fidelity_is_recorded_for_both_models_with_12_seeds_a_side():
    from corelib.results import load_json

    models = {load_json(path)["provenance"]["args"]["model"] for path in _fidelity_records()}
    assert models == {"modular", "sweeps"}
    for path in _fidelity_records():
        rec = load_json(path)
        assert len(rec["seeds"]["fp32"]) == len(rec["seeds"]["bf16"]) >= 12, path.name
        prov = rec["provenance"]
        assert prov["bf16_native"] is True and prov["machine"]["cpu"] and prov["commit"], path.name


@pytest.mark.parametrize("path", _fidelity_records(), ids=lambda p: p.stem)
def test_a_recorded_bf16_fidelity_is_what_its_seeds_give(path):
    from bf16_fidelity import END_QUANTITIES, QUANTITIES, compare
    from corelib.results import load_json

    rec = load_json(path)
    quantities = tuple(q for q in (*QUANTITIES, *END_QUANTITIES) if q in rec["comparison"])
    again = compare(rec["seeds"]["fp32"], rec["seeds"]["bf16"], quantities)
    assert again.keys() == rec["comparison"].keys(), path.name
    for q, row in again.items():
        assert row == pytest.approx(rec["comparison"][q]), (path.name, q)
    for q, row in rec["comparison"].items():  # the medians are of the recorded seeds
        for precision in ("fp32", "bf16"):
            values = [s[q] for s in rec["seeds"][precision] if s[q] is not None]
            assert row[f"median_{precision}"] == pytest.approx(float(np.median(values))), (path.name, q)


def test_bf16_fidelity_pairs_each_seed_with_itself_and_tests_the_shifts():
    from scipy import stats

    from bf16_fidelity import paired

    fp32 = [{"seed": s, "delay": 100 + 10 * s} for s in range(8)]
    shifted = [{"seed": s, "delay": 100 + 10 * s + 5 + (s % 3)} for s in range(8)]
    out = paired(fp32, shifted, "delay")  # every seed 5-7 later: invisible to Mann-Whitney, not here
    assert out["median_shift"] == 6.0 and out["n_pairs"] == 8
    assert out["p_paired"] == pytest.approx(stats.wilcoxon([5, 6, 7, 5, 6, 7, 5, 6]).pvalue) and out["p_paired"] < 0.01
    assert paired(fp32, fp32, "delay") == {"n_pairs": 8, "W": 0.0, "p_paired": 1.0, "median_shift": 0.0}
    gaps = [{**r, "delay": None} if r["seed"] == 0 else r for r in shifted]
    assert paired(fp32, gaps, "delay")["n_pairs"] == 7  # a seed without a value in one precision is left out
    with pytest.raises(ValueError, match="same seeds in the same order"):
        paired(fp32, shifted[::-1], "delay")


def test_a_condition_is_scaled_by_the_seeds_still_running_at_each_step():
    from paper_profile_times import scaled_seconds

    # seeds stop after 10, 20 and 40 steps; a step of 3 seeds takes 3 s, of 1 seed 1 s (2 s at 2)
    assert scaled_seconds([40, 10, 20], full=3.0, single=1.0) == 10 * 3 + 10 * 2 + 20 * 1
    assert scaled_seconds([7], full=5.0, single=2.0) == 7 * 2.0  # one seed: its own rate
    assert scaled_seconds([5, 5], full=4.0, single=1.0) == 5 * 4.0  # seeds that stop together


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "0"], "--steps must be at least 1"),
        (["--out", "/no/such/folder/times.json"], "--out: the folder /no/such/folder does not exist"),
        (["--check", "p=54 wd=1 B=512"], "--check: no condition 'p=54 wd=1 B=512' in these sweeps"),
        (["--rederive-condition", "p=53"], "--rederive-condition: no condition 'p=53'"),
        (["--only", "core_inflation", "--check", "p=53 wd=3 B=512"], "--check trains a sweep condition"),
        (["--only", "grokking_sweeps", "--out", "times.json"], "--out records both runs"),
    ],
)
def test_the_paper_profile_timer_refuses_bad_arguments_before_any_work(args, message, monkeypatch):
    import paper_profile_times

    for name in ("train_stack", "train_condition", "verify"):
        monkeypatch.setattr(paper_profile_times, name, lambda *a, **k: pytest.fail("worked before refusing"))
    with pytest.raises(SystemExit, match=re.escape(message)):
        paper_profile_times.main(args)


def test_a_rederivation_is_recorded_by_what_its_comparison_found():
    from corelib.agreement import Agreement, QuantityAgreement
    from paper_profile_times import agreement_summary

    def quantity(recorded, rederived, allowed):
        return QuantityAgreement("q", np.array(recorded), np.array(rederived), 2.0, allowed, 0.0, 1.0)

    moved = Agreement(10, ("a: 1 vs 2",), (quantity([1, 2], [1, 2], 1.0), quantity([1, 2], [2, 3], 1.0)))
    assert agreement_summary(moved, 12.34) == {
        "seconds": 12.3,
        "identical": False,
        "values_moved": [1, 10],
        "quantities_moved": [1, 2],
        "largest_change_of_a_mean_in_standard_errors": 0.5,  # a mean moved by 1, its standard error 2
        "agrees": True,
    }
    beyond = Agreement(10, ("a",), (quantity([1, 2], [5, 6], 1.0),))
    assert agreement_summary(beyond, 1.0)["agrees"] is False


GPU_TIMES = ROOT / "recorded" / "paper_profile_gpu.json"


def test_the_recorded_gpu_times_are_the_recorded_runs_lengths_at_the_measured_rates():
    """Each scaled time is recomputed here from the sweeps' records and the step times measured."""
    from acebook.run_times import gpu_paper_times
    from corelib.recorded import load_recorded
    from corelib.results import load_json
    from paper_profile_times import recorded_stops, scaled_seconds

    rec = load_json(GPU_TIMES)
    assert rec["machine"]["device"].endswith("(cuda)") and rec["code"]["commit"], rec["machine"]
    per_epoch = rec["core_inflation"]["seconds_per_epoch"]
    for arm in rec["core_inflation"]["arms"]:
        assert arm["seconds"] == pytest.approx(per_epoch * arm["epochs"], abs=0.05), arm
    sweeps = load_recorded("grokking_sweeps")
    cpu = sweeps["provenance"]["training_seconds"]
    for row in rec["grokking_sweeps"]["conditions"]:
        p, wd, batch = (part.split("=")[1] for part in row["condition"].split())
        stops = {
            r["seed"]: r["stopped_at"]
            for r in sweeps["records"]
            if (r["p"], r["weight_decay"]) == (int(p), float(wd)) and (batch == "full") == (r["batch_size"] != 512)
        }
        steps = rec["grokking_sweeps"]["step_seconds"][f"p={p} B={batch}"]
        assert len(stops) == 12 and row["steps"] == max(stops.values()), row
        assert row["seconds"] == pytest.approx(
            scaled_seconds(list(stops.values()), steps["full_stack"], steps["one_seed"]), abs=0.05
        ), row
        assert row["recorded_cpu_seconds"] == cpu[row["condition"]]
    totals = rec["totals_seconds"]
    assert totals["grokking_sweeps"] == pytest.approx(sum(r["seconds"] for r in rec["grokking_sweeps"]["conditions"]))
    assert totals["core_inflation"] == pytest.approx(sum(a["seconds"] for a in rec["core_inflation"]["arms"]))
    assert gpu_paper_times(ROOT / "recorded").agrees  # the claims page says both re-derivations agree
    stops = recorded_stops(sweeps)  # the script's matching, against the one above
    assert {r["condition"]: r["steps"] for r in rec["grokking_sweeps"]["conditions"]} == {
        label: max(s) for label, s in stops.items()
    }


def test_the_recorded_gpu_times_were_checked_on_a_whole_condition():
    """The slices' scaling against one condition trained whole on the same GPU: within a factor of 2."""
    from corelib.results import load_json

    check = load_json(GPU_TIMES)["grokking_sweeps"]["check"]
    assert 0.5 < check["scaled_seconds"] / check["measured_seconds"] < 2.0, check


@pytest.mark.slow
def test_the_paper_profile_timer_runs_a_slice_and_scales_it(tmp_path):
    run = run_script(
        "paper_profile_times.py", "--only", "core_inflation", "--warm-epochs", "1", "--epochs", "2",
        env={"ACE_RESULTS_DIR": str(tmp_path), "ACE_DEVICE": "cpu"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    rows = dict(re.findall(r"^  (wd|no_wd)\s+([\d.]+) s on cpu", run.stdout, flags=re.M))
    assert set(rows) == {"wd", "no_wd"}, run.stdout
    # both arms at one rate: their times stand as their epochs, 20000 to 19100
    assert float(rows["no_wd"]) / float(rows["wd"]) == pytest.approx(19100 / 20000, abs=1e-3)


@pytest.mark.slow  # runs the benchmark
def test_the_deferred_checks_benchmark_prints_both_sides_and_equal_records(capsys):
    import deferred_checks

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit for bit on one thread
    try:
        out = deferred_checks.main(
            ["--p", "11", "--batch", "0", "--seeds", "2", "--steps", "6", "--sync-every", "4", "--repeats", "1"]
        )
    finally:
        torch.set_num_threads(threads)
    assert out["same_records"] == 1.0 and out["every_step"] > 0 and out["every_span"] > 0
    printed = capsys.readouterr().out
    assert "read after every step" in printed and "read every    4 steps" in printed
    assert "records equal                    : yes" in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sync-every", "1"], "--sync-every 1 is the other side"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--device", "nonsense"], "--device:"),
    ],
)
def test_the_deferred_checks_benchmark_refuses_bad_arguments_before_any_work(args, message, monkeypatch):
    import deferred_checks

    monkeypatch.setattr(deferred_checks, "train_condition", lambda *a, **k: pytest.fail("worked before refusing"))
    with pytest.raises(SystemExit, match=re.escape(message)):
        deferred_checks.main(args)
