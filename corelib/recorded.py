"""Paper-scale results run once and kept in the repository (``recorded/``).

The paper's own settings take hours on a CPU (20 000 epochs of core inflation, 12 seeds x 13
conditions of grokking sweeps), so the book does not recompute them on every build: they were
run to completion once and their compact results committed, each folder with a
``provenance.json`` (profile, parameters, code version, machine, precision, wall time and the
command that re-derives a sample of it). Files are read through :mod:`corelib.results`, so a
damaged or edited record is refused, not shown.

A recorded folder holds ``provenance.json`` and the results of one experiment:

- ``core_inflation``: ``arms.json`` (per-snapshot analysis records of both arms, without the
  fitted operators) and ``history.json`` (per-epoch training history of both arms, to 6
  significant digits);
- ``core_inflation_questions``: ``arms.json``, the weight-decay arm trained again at the paper's
  settings with dropout 0 (``dropout0``) and with the recorded run's dropout 0.1 (``control``), as
  :class:`corelib.experiments.core_inflation_questions.ArmQuestions` records: the chapter's tests of
  its own explanations;
- ``grokking_sweeps``: ``records.json`` (one record per condition and seed, for both sweeps);
- ``grokking_sweeps_moduli``: ``records.json`` as ``grokking_sweeps``, for the modulus sweep's
  conditions near the critical modulus (:mod:`corelib.experiments.grokking_sweeps_moduli`);
- ``inflation_clock``: ``runs.json`` (per (lr, wd) pair, its snapshot records) and ``window.json``
  (the branch epoch and, per arm, its snapshot records and training history). Its ``book``
  profile is recorded too: the chapter's full experiment takes longer than the book's time.
- ``inflation_clock_window``: the window alone, on a clock whose pairs are not all run (the
  paper's): ``window.json`` as above but without the histories, which are in
  ``histories.safetensors`` (float32, under a third of their size in JSON; the training passes
  compute in float32 too), ``branch_run.json`` (the identity of the run the arms branch from)
  and ``branch_weights.safetensors`` (its weights at the branch), from which a build re-derives
  the first epochs of an arm without training up to the branch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .results import PROJECT_ROOT, StoreError, load_json, load_tensors

if TYPE_CHECKING:
    import torch

__all__ = [
    "RECORDED_DIR",
    "recorded_root",
    "recorded_path",
    "is_recorded",
    "load_recorded",
    "provenance",
    "compare_values",
    "BRANCH_WEIGHTS",
    "HISTORIES",
    "history_tensors",
    "histories_from_tensors",
]

RECORDED_DIR = PROJECT_ROOT / "recorded"


def recorded_root() -> Path:
    """Where recorded results are read: ``ACE_RECORDED_DIR`` if set, else :data:`RECORDED_DIR`."""
    return Path(os.environ.get("ACE_RECORDED_DIR") or RECORDED_DIR)


_PARTS = {
    "core_inflation": ("arms", "history"),
    "core_inflation_questions": ("arms",),
    "grokking_sweeps": ("records",),
    "grokking_sweeps_moduli": ("records",),
    "inflation_clock": ("runs", "window"),
    "inflation_clock_window": ("window", "branch_run"),
}

BRANCH_WEIGHTS = "branch_weights.safetensors"
"""The file of an ``inflation_clock_window`` record that holds the weights at the branch."""

HISTORIES = "histories.safetensors"
"""The file of an ``inflation_clock_window`` record that holds each arm's training history."""

_HISTORY_KEYS = ("epoch", "loss", "train_acc", "test_acc")


def history_tensors(histories: dict[str, dict[str, list]]) -> dict[str, torch.Tensor]:
    """Training histories (``{arm: corelib.engine.load_history(...)}``) as named tensors: per arm,
    ``<arm>.epoch`` (int32, epochs), ``<arm>.loss`` and ``.train_acc`` (float32, epochs x seeds),
    ``.test_acc`` (float32, the rows where it was measured) and ``.test_rows`` (int32, which rows
    those are). Values are rounded to float32, within 6e-8 of the given ones relative to their size."""
    import torch

    out = {}
    for arm, hist in histories.items():
        if set(hist) != set(_HISTORY_KEYS) or "." in arm:
            raise ValueError(f"history of {arm!r}: expected an arm name without '.' and the keys {_HISTORY_KEYS}.")
        if not hist["loss"]:
            raise ValueError(f"history of {arm!r} is empty: train the arm before recording it.")
        n_seeds = len(hist["loss"][0]) if hist["loss"] else 0
        measured = [i for i, row in enumerate(hist["test_acc"]) if row is not None]
        out[f"{arm}.epoch"] = torch.tensor(hist["epoch"], dtype=torch.int32)
        out[f"{arm}.test_rows"] = torch.tensor(measured, dtype=torch.int32)
        for key in ("loss", "train_acc"):
            out[f"{arm}.{key}"] = torch.tensor(hist[key], dtype=torch.float32).reshape(-1, n_seeds)
        test = [hist["test_acc"][i] for i in measured]
        out[f"{arm}.test_acc"] = torch.tensor(test, dtype=torch.float32).reshape(-1, n_seeds)
    return out


def histories_from_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, list]]:
    """The histories :func:`history_tensors` stored, as :func:`corelib.engine.load_history` gives
    them (a test accuracy that was not measured is None again)."""
    out = {}
    for arm in sorted({k.rsplit(".", 1)[0] for k in tensors}):
        hist = {key: tensors[f"{arm}.{key}"].tolist() for key in ("epoch", "loss", "train_acc")}
        test: list[list[float] | None] = [None] * len(hist["epoch"])
        for i, row in zip(tensors[f"{arm}.test_rows"].tolist(), tensors[f"{arm}.test_acc"].tolist()):
            test[i] = row
        out[arm] = {**hist, "test_acc": test}
    return out


def recorded_path(name: str, profile: str = "paper", root: Path | str | None = None) -> Path:
    """Folder of the recorded results of experiment ``name`` at ``profile``."""
    if name not in _PARTS:
        raise ValueError(f"no recorded results are kept for {name!r}; choose one of {sorted(_PARTS)}.")
    return Path(root or recorded_root()) / f"{name}_{profile}"


def is_recorded(name: str, profile: str = "paper", root: Path | str | None = None) -> bool:
    """Whether the results of ``name`` at ``profile`` have been recorded."""
    return (recorded_path(name, profile, root) / "provenance.json").exists()


def _restore(folder: Path, exc: StoreError) -> StoreError:
    """A damaged record is restored from version control, never recomputed (that takes hours): the
    store's own fix (delete and recompute) is replaced by that."""
    problem = str(exc).split("; delete", 1)[0].rstrip(".")
    shown = folder.relative_to(PROJECT_ROOT) if folder.is_relative_to(PROJECT_ROOT) else folder
    return StoreError(
        f"the recorded run {folder} is refused: {problem}. Do not recompute it (hours of training); restore it "
        f"from git: `git checkout -- {shown}`."
    )


def provenance(name: str, profile: str = "paper", root: Path | str | None = None) -> dict[str, Any]:
    """Where a record comes from: profile, parameters, code, machine, precision, wall time, command."""
    folder = recorded_path(name, profile, root)
    if not (folder / "provenance.json").exists():
        raise StoreError(
            f"no recorded {profile}-profile results of {name} in {folder}; "
            f"record them with `python -m acebook.record export {name}` after a {profile}-profile run."
        )
    try:
        return load_json(folder / "provenance.json")
    except StoreError as exc:
        raise _restore(folder, exc) from None


def load_recorded(name: str, profile: str = "paper", root: Path | str | None = None) -> dict[str, Any]:
    """The recorded results of ``name`` at ``profile``: its parts and ``provenance``, each file verified
    (a damaged one is refused with the fix: restore it from git)."""
    try:
        return _load_recorded(name, profile, root)
    except StoreError as exc:
        raise (_restore(recorded_path(name, profile, root), exc) if "; delete" in str(exc) else exc) from None


def _load_recorded(name: str, profile: str, root: Path | str | None) -> dict[str, Any]:
    out = {"provenance": provenance(name, profile, root)}
    folder = recorded_path(name, profile, root)
    for part in _PARTS[name]:
        out[part] = load_json(folder / f"{part}.json")
    if name == "inflation_clock_window" and (folder / HISTORIES).exists():  # earlier exports kept them in JSON
        histories = histories_from_tensors(load_tensors(folder / HISTORIES))
        missing = sorted(set(out["window"]["arms"]) - set(histories))
        if missing:
            raise StoreError(
                f"{folder / HISTORIES} holds no history of the arms {missing}; restore the record with `git "
                f"checkout -- recorded/{folder.name}` or export it again (`python -m acebook.record export {name}`)."
            )
        for arm, kept in out["window"]["arms"].items():
            kept["history"] = histories[arm]
    return out


def compare_values(recorded: Any, fresh: Any, tolerance: float, where: str = "") -> list[str]:
    """Differences between a record and its re-derivation: integers, strings and None exactly,
    floats within ``tolerance`` (absolute), lists and dicts element by element."""
    if isinstance(recorded, dict) and isinstance(fresh, dict):
        if set(recorded) != set(fresh):
            return [f"{where}: keys {sorted(set(recorded) ^ set(fresh))} in only one of them"]
        return [p for k in recorded for p in compare_values(recorded[k], fresh[k], tolerance, f"{where}.{k}")]
    if isinstance(recorded, list) and isinstance(fresh, list):
        if len(recorded) != len(fresh):
            return [f"{where}: {len(recorded)} recorded entries, {len(fresh)} re-derived"]
        return [
            p for i, (a, b) in enumerate(zip(recorded, fresh)) for p in compare_values(a, b, tolerance, f"{where}[{i}]")
        ]
    if isinstance(recorded, float) or isinstance(fresh, float):
        if isinstance(recorded, bool) or isinstance(fresh, bool) or recorded is None or fresh is None:
            return [] if recorded == fresh else [f"{where}: recorded {recorded!r}, re-derived {fresh!r}"]
        a, b = float(recorded), float(fresh)
        if (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tolerance:
            return []
        return [f"{where}: recorded {a!r}, re-derived {b!r}"]
    return [] if recorded == fresh else [f"{where}: recorded {recorded!r}, re-derived {fresh!r}"]
