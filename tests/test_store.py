"""The verified store: every file read back is checked; racing processes and kills leave usable runs."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from corelib import results
from corelib.engine import PrefixData, StackConfig, load_history, load_snapshot, snapshot_epochs, train_stack
from corelib.models import TransformerConfig
from corelib.results import StoreError, save_json
from corelib.tasks.modular import modular_addition_split

ROOT = Path(__file__).resolve().parent.parent
CFG = TransformerConfig(vocab_size=7, d_model=16, n_heads=2, d_ff=32, n_layers=1, n_ctx=2, dropout=0.1)


def _data():
    (x, y), (xt, yt) = modular_addition_split(7, 0.5, 0)
    return PrefixData.from_tokens(x, y), PrefixData.from_tokens(xt, yt)


def _flip(path: Path, where: float = 0.5) -> None:
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * where)] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("store") / "run"
    train_stack(
        CFG,
        StackConfig(epochs=2, batch_size=8, snapshot_every=1, checkpoint_every=1),
        (1, 2),
        *_data(),
        run,
        progress=False,
    )
    return run


def _readers(run: Path) -> dict:
    """How the engine reads each kind of file of a run."""
    state = json.loads((run / "progress.json").read_text())["state"]
    return {
        "snapshot (safetensors)": (
            run / "snapshots" / "epoch_000001.safetensors",
            lambda: load_snapshot(run, 1, "cpu"),
        ),
        "state tensors": (
            run / f"{state}.safetensors",
            lambda: train_stack(
                CFG,
                StackConfig(epochs=3, batch_size=8, snapshot_every=1, checkpoint_every=1),
                (1, 2),
                *_data(),
                run,
                progress=False,
            ),
        ),
        "state JSON": (run / f"{state}.json", lambda: load_history(run)),
        "run.json": (run / "run.json", lambda: load_snapshot(run, 1, "cpu")),
        "progress.json": (run / "progress.json", lambda: snapshot_epochs(run)),
        "manifest.json": (run / "manifest.json", lambda: load_history(run)),
    }


@pytest.mark.parametrize(
    "kind", ["snapshot (safetensors)", "state tensors", "state JSON", "run.json", "progress.json", "manifest.json"]
)
@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_file_of_each_kind_is_refused_naming_the_file(trained_run, tmp_path, kind, damage):
    run = tmp_path / "run"
    import shutil

    shutil.copytree(trained_run, run)
    path, read = _readers(run)[kind]
    if damage == "flipped byte":
        _flip(path)
    else:
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(StoreError, match=rf"{path.name}.*(delete|recompute)"):
        read()


def test_json_and_tensors_written_by_hand_or_edited_are_refused(tmp_path):
    results.save_json(tmp_path / "analysis.json", {"r2": 0.5})
    (tmp_path / "analysis.json").write_text(json.dumps({"r2": 0.99}, indent=2, sort_keys=True))  # edited
    with pytest.raises(StoreError, match="analysis.json is damaged or was edited"):
        results.load_json(tmp_path / "analysis.json")
    (tmp_path / "hand.json").write_text("{}")
    with pytest.raises(StoreError, match="hand.json is not recorded"):
        results.load_json(tmp_path / "hand.json")
    results.save_tensors(tmp_path / "w.safetensors", {"w": torch.arange(4.0)})
    assert torch.equal(results.load_tensors(tmp_path / "w.safetensors")["w"], torch.arange(4.0))
    results.remove(tmp_path / "w.safetensors")
    assert "w.safetensors" not in results.stored_files(tmp_path) and not (tmp_path / "w.safetensors").exists()


def test_a_sweep_record_edited_by_hand_is_recomputed_with_a_warning(tmp_path):
    from corelib.tasks.sweeps import Condition, SweepConfig, condition_dir, load_record

    cond, cfg = Condition(p=7, weight_decay=1.0), SweepConfig(d_model=16, n_heads=2, d_ff=32)
    folder = condition_dir(cond, cfg, tmp_path)
    (folder / "seed_0.json").write_text("{}")
    with pytest.warns(UserWarning, match="seed_0.json cannot be read .*not recorded"):
        assert load_record(folder, cond, cfg, 0) is None


def _writer(folder: str, worker: int, n: int) -> None:
    for i in range(n):
        results.save_json(Path(folder) / f"w{worker}_{i}.json", {"worker": worker, "i": i})
        results.save_json(Path(folder) / "shared.json", {"worker": worker, "i": i})


@pytest.mark.slow
def test_processes_writing_into_one_folder_keep_its_manifest_whole(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 25)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    names = results.stored_files(tmp_path)
    assert sorted(names) == sorted([f"w{w}_{i}.json" for w in range(3) for i in range(25)] + ["shared.json"])
    for name in names:
        results.load_json(tmp_path / name)  # every entry matches its file
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


_RACE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from corelib.experiments import markov_chain
    p = markov_chain.MarkovParams(n_train=64, n_test=32, seeds=(0, 1), epochs=2, d_model=16, d_ff=32, n_jacobians=8)
    print(json.dumps(markov_chain.run(p, progress=False).to_json()["models"][0]["accuracy"]))
""")


@pytest.mark.slow
def test_two_processes_running_one_experiment_at_once_both_succeed_with_one_result(tmp_path, monkeypatch):
    from corelib.experiments import markov_chain

    env = {**os.environ, "ACE_RESULTS_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    params = markov_chain.MarkovParams(
        n_train=64, n_test=32, seeds=(0, 1), epochs=2, d_model=16, d_ff=32, n_jacobians=8
    )
    # Hold the experiment's lock until both processes wait for it, so that they really race.
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    with results.run_lock(markov_chain.run_folder(params)):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACE.format(root=str(ROOT))],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        waiting = [p.stderr.readline() for p in procs]  # each prints one line when it finds the lock taken
    assert all("waiting for another process" in line for line in waiting), waiting
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[0][0] == outs[1][0]


def test_snapshots_never_run_ahead_of_the_saved_state(tmp_path, monkeypatch):
    from corelib import engine

    commits = []

    def spy(path, obj):
        if Path(path).name == "progress.json":
            commits.append(json.loads(json.dumps(obj)))
        save_json(path, obj)

    monkeypatch.setattr(engine, "save_json", spy)
    cfg = StackConfig(epochs=7, batch_size=8, snapshot_every=3, checkpoint_every=4)
    train_stack(
        CFG.__class__(**{**CFG.to_dict(), "dropout": 0.0}), cfg, (1,), *_data(), tmp_path / "run", progress=False
    )
    assert [c["epoch"] for c in commits] == [0, 3, 4, 6, 7]
    for c in commits[1:]:  # a run that looks trained to its last snapshot has that epoch's history
        assert c["epoch"] >= max(c["snapshots"]) and c["state"] == f"state_{c['epoch']:06d}"


_KILL = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from corelib import engine
    from tests.test_store import CFG, _data

    def save_json(path, obj):  # die just before the final checkpoint is committed
        if Path(path).name == "progress.json" and obj["epoch"] == {epochs}:
            os.kill(os.getpid(), signal.SIGKILL)
        original(path, obj)

    original, engine.save_json = engine.save_json, save_json
    engine.train_stack(CFG, engine.StackConfig(epochs={epochs}, batch_size=8, snapshot_every=2, checkpoint_every=4),
                       (1, 2), *_data(), Path({run!r}), progress=False)
""")


@pytest.mark.slow
def test_a_run_killed_at_its_last_epoch_resumes_to_the_uninterrupted_result(tmp_path):
    epochs, run = 6, tmp_path / "killed"
    child = subprocess.run(
        [sys.executable, "-c", _KILL.format(root=str(ROOT), epochs=epochs, run=str(run))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    # Both final files are complete on disk, but nothing commits them: the run is not finished.
    assert (run / "snapshots" / f"epoch_{epochs:06d}.safetensors").exists()
    assert max(snapshot_epochs(run)) == 4 and len(load_history(run)["epoch"]) == 4
    # and what a kill between writing and committing another checkpoint would leave: never read, removed
    results.save_json(run / "state_000099.json", {"epoch": 99})
    results.save_tensors(run / "snapshots" / "epoch_000099.safetensors", {"w": torch.zeros(1)})
    cfg = StackConfig(epochs=epochs, batch_size=8, snapshot_every=2, checkpoint_every=4)
    resumed, hist_r = train_stack(CFG, cfg, (1, 2), *_data(), run, progress=False)
    whole, hist_w = train_stack(CFG, cfg, (1, 2), *_data(), tmp_path / "whole", progress=False)
    assert hist_r == hist_w and hist_r["epoch"] == list(range(1, epochs + 1))
    assert all(torch.equal(resumed.params[k], whole.params[k]) for k in whole.params)
    assert snapshot_epochs(run) == snapshot_epochs(tmp_path / "whole")

    def files(folder):
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and ".lock" not in p.name)

    assert files(run) == files(tmp_path / "whole")  # the orphans are gone, nothing else differs


def test_an_existing_run_folder_is_found_while_another_process_holds_its_lock(tmp_path):
    """A process training a run holds its lock for hours; finding the folder must not wait for it."""
    import threading

    from corelib.results import run_dir, run_lock

    folder = run_dir("kind", {"a": 1}, tmp_path)
    held, release = threading.Event(), threading.Event()

    def hold():
        with run_lock(folder, "training"):
            held.set()
            release.wait(30)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        held.wait(10)
        found: list = []
        finder = threading.Thread(target=lambda: found.append(run_dir("kind", {"a": 1}, tmp_path)))
        finder.start()
        finder.join(3)
        assert found == [folder]  # found while the lock is still held
    finally:
        release.set()
        worker.join()


class _UnwritableLock:
    """What a lock file in a folder we may not write gives: the OS refuses to create it."""

    def acquire(self, *args, **kwargs):
        import errno

        raise PermissionError(errno.EACCES, "Permission denied")

    def release(self):  # pragma: no cover - never held
        raise AssertionError("released a lock that was never held")


def test_stored_results_are_read_from_a_folder_that_cannot_be_written(tmp_path, monkeypatch):
    save_json(tmp_path / "run" / "values.json", {"rank": 3})
    monkeypatch.setattr(results, "_lock", lambda path: _UnwritableLock())
    assert results.load_json(tmp_path / "run" / "values.json") == {"rank": 3}  # verified, without a lock
    assert results.stored_files(tmp_path / "run") == ["values.json"]
    with pytest.raises(StoreError, match=r"cannot write into the results folder .*run \(Permission denied\); make it"):
        save_json(tmp_path / "run" / "more.json", {"rank": 4})
    with pytest.raises(StoreError, match="ACE_RESULTS_DIR"):
        with results.run_lock(tmp_path / "run"):
            pass


def test_a_full_disk_is_reported_with_the_folder_and_what_to_do(tmp_path, monkeypatch):
    import errno

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results, "_replace", full)
    with pytest.raises(StoreError, match=r"results folder .*full \(No space left on device\); free some space"):
        save_json(tmp_path / "full" / "values.json", {"rank": 3})


def test_the_temporary_files_of_a_killed_writer_are_removed_and_a_live_ones_kept(tmp_path):
    folder = tmp_path / "run"
    save_json(folder / "values.json", {"rank": 3})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = folder / f".manifest.json.{dead.stdout.strip()}.0123abcd.tmp"
    live = folder / f".values.json.{os.getppid()}.0123abcd.tmp"
    for tmp in (orphan, live):
        tmp.write_text("half written")
    save_json(folder / "more.json", {"rank": 4})  # the next write into the folder tidies it
    assert not orphan.exists() and live.exists()
    assert results.load_json(folder / "values.json") == {"rank": 3}
