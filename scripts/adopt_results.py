"""Bring a results folder written before the verified store (torch ``.pt`` checkpoints) into it.

    python scripts/adopt_results.py ~/ace-results            # convert and adopt everything
    python scripts/adopt_results.py ~/ace-results --dry-run  # list what would change

Training runs (folders with ``run.json`` and an old ``manifest.json``): every file is first checked
against the old manifest's SHA-256; the snapshots and the latest state are then rewritten as
safetensors + JSON (same tensors, same history), ``progress.json`` commits them, and the ``.pt``
files and the old manifest are removed. Every other JSON file that parses is recorded as it is in
its folder's new manifest. Anything that fails a check is reported and left untouched, so the
code recomputes it. Nothing runs while another process trains in the same folder (its run lock).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from corelib import results  # noqa: E402


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_old_run(folder: Path) -> bool:
    manifest = folder / "manifest.json"
    if not (folder / "run.json").exists() or not manifest.exists():
        return False
    try:
        return "state" in json.loads(manifest.read_text())
    except ValueError:
        return False


def convert_run(run: Path, dry_run: bool) -> str:
    """Rewrite one old training run in the store's format; returns what was done."""
    old = json.loads((run / "manifest.json").read_text())
    for rel, digest in old["files"].items():
        if not (run / rel).exists() or _sha256(run / rel) != digest:
            return f"SKIPPED {run}: {rel} is missing or damaged"
    if dry_run:
        return f"would convert {run} (state {old['state']}, {len(old['snapshots'])} snapshots)"
    run_json = json.loads((run / "run.json").read_text())
    state = torch.load(run / old["state"], map_location="cpu", weights_only=True)
    snapshots = {
        e: torch.load(run / f"snapshots/epoch_{e:06d}.pt", map_location="cpu", weights_only=True)["params"]
        for e in old["snapshots"]
    }
    (run / "manifest.json").unlink()
    (run / "snapshots" / "manifest.json").unlink(missing_ok=True)
    results.save_json(run / "run.json", run_json)
    for e, params in snapshots.items():
        results.save_tensors(run / "snapshots" / f"epoch_{e:06d}.safetensors", params)
    name = Path(old["state"]).stem
    opt = state["optimizer"]
    tensors = {
        **{f"params.{k}": v for k, v in state["params"].items()},
        **{f"optimizer.{i}.{n}": t for i, slot in opt["state"].items() for n, t in slot.items()},
        "rng.torch": state["rng"],
    }
    if "dropout_rng" in state:
        tensors["rng.dropout"] = state["dropout_rng"]
    results.save_tensors(run / f"{name}.safetensors", tensors)
    results.save_json(
        run / f"{name}.json",
        {
            "epoch": state["epoch"],
            "history": state["history"],
            "run_key": state["run_key"],
            "optimizer": {"param_groups": opt["param_groups"]},
        },
    )
    results.save_json(
        run / "progress.json", {"epoch": state["epoch"], "state": name, "snapshots": sorted(old["snapshots"])}
    )
    for rel in old["files"]:
        if rel.endswith(".pt"):
            (run / rel).unlink()
    return f"converted {run} (epoch {state['epoch']}, {len(snapshots)} snapshots)"


def adopt_json(path: Path, dry_run: bool) -> str | None:
    """Record a JSON file that parses in its folder's manifest (None if it is already recorded)."""
    try:
        if path.name in results.stored_files(path.parent):
            return None
    except results.StoreError as err:
        return f"SKIPPED {path}: {err}"
    try:
        obj = json.loads(path.read_text())
    except ValueError as err:
        return f"SKIPPED {path}: not valid JSON ({err}); it will be recomputed"
    if not dry_run:
        results.save_json(path, obj)
    return f"{'would adopt' if dry_run else 'adopted'} {path}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    runs = sorted({p.parent for p in args.root.rglob("run.json") if _is_old_run(p.parent)})
    for run in runs:
        with results.run_lock(run, "adopting results"):
            print(convert_run(run, args.dry_run))
    for path in sorted(args.root.rglob("*.json")):
        if path.name != "manifest.json" and not any(r in path.parents for r in runs if args.dry_run):
            message = adopt_json(path, args.dry_run)
            if message:
                print(message)


if __name__ == "__main__":
    main()
