"""Results on disk: one folder per run, keyed by a hash of its parameters.

A run folder holds ``params.json`` (what was run), checkpoints, and the arrays and numbers the
analysis produced. Plots and the book read these files, so re-rendering never retrains, and a
changed parameter gives a new folder instead of silently reusing stale results.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

__all__ = ["load_json", "params_key", "results_root", "run_dir", "save_json"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def results_root() -> Path:
    """Folder holding all runs: ``$ACE_RESULTS_DIR`` or ``results/`` in the project."""
    return Path(os.environ.get("ACE_RESULTS_DIR", PROJECT_ROOT / "results"))


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=_jsonable)


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"cannot store {type(x).__name__} in run parameters; use numbers, strings, lists.")


def params_key(params: dict) -> str:
    """Short stable hash of a parameter dictionary (key order does not matter)."""
    return hashlib.sha256(_canonical(params).encode()).hexdigest()[:16]


def run_dir(kind: str, params: dict, root: Path | None = None) -> Path:
    """The folder of the run ``kind`` with ``params``; created with its ``params.json`` if new."""
    folder = Path(root or results_root()) / kind / params_key(params)
    folder.mkdir(parents=True, exist_ok=True)
    stored = folder / "params.json"
    canonical = json.loads(_canonical(params))
    if stored.exists():
        if json.loads(stored.read_text()) != canonical:
            raise ValueError(f"{stored} holds different parameters than requested; delete {folder}.")
    else:
        save_json(stored, canonical)
    return folder


def save_json(path: Path, obj) -> None:
    """Write ``obj`` as JSON atomically (a crash never leaves a half-written file)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable))
    os.replace(tmp, path)


def load_json(path: Path):
    """Read a JSON file written by :func:`save_json`."""
    return json.loads(Path(path).read_text())
