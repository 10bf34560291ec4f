"""Record paper-scale results into ``recorded/``, and re-derive a sample of a record to check it.

::

    python -m acebook.record export core_inflation      # after a paper-profile run has finished
    python -m acebook.record export grokking_sweeps --logs ~/sweeps*.log  # drivers' logs: wall times
    python -m acebook.record verify core_inflation --epochs 1000
    python -m acebook.record verify grokking_sweeps --condition "p=53 wd=3 B=512"
    python -m acebook.record export inflation_clock --profile book
    python -m acebook.record verify inflation_clock --profile book --epochs 204
    python -m acebook.record export inflation_clock_window   # the window alone (paper_runs ... --window)
    python -m acebook.record verify inflation_clock_window --epochs 200

``export`` reads the finished run from the results root (``ACE_RESULTS_DIR``); it refuses a run
that has not reached the profile's horizon. ``verify`` recomputes the sample from scratch in a
temporary results root, with the recorded parameters, and compares it with the record: equal
integers (ranks, mode counts, steps), floats within ``--tolerance``. On the machine and code of
the record the sample is identical; elsewhere float rounding may move an accuracy at a threshold.

The exporters of each experiment are :mod:`acebook.record_exports` (their public names are
importable from here too); this module writes the provenance, re-derives and compares samples,
and records the chapters' costs and the claims' statuses.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from corelib import agreement
from corelib.agreement import Agreement
from corelib.experiments import inflation_clock, modular_runs, paper_scale
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.models import default_device
from corelib.recorded import provenance, recorded_path, recorded_root
from corelib.results import StoreError, fresh_results_root, load_json, results_root, save_json
from corelib.tasks.sweeps import condition_key, record_problems, run_condition

from .project import PROJECT_ROOT, ConfigError, profile_table
from .record_exports import (
    WINDOW_SAMPLE_ARM,
    clock_params,
    export_core_inflation,
    export_grokking_sweeps,
    export_grokking_sweeps_moduli,
    export_inflation_clock,
    export_inflation_clock_window,
    inflation_params,
    sweep_wall_seconds,
    sweeps_params,
)
from .record_questions import export_questions, verify_questions
from .run_times import CODE_DIGITS, corelib_hash, git_commit

__all__ = [
    "export",
    "export_costs",
    "verify",
    "machine",
    "compute_device",
    "computed_on",
    "main",
    "clock_params",
    "inflation_params",
    "sweep_wall_seconds",
    "sweeps_params",
]


def machine() -> dict[str, Any]:
    """The machine a record was computed on: CPU, cores, torch, threads."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux
        cpuinfo = ""
    return {
        "cpu": cpu_name(cpuinfo),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def cpu_name(cpuinfo: str) -> str:
    """The CPU's model name from the text of ``/proc/cpuinfo``; else what ``platform`` says (e.g.
    "arm" on a Mac, "x86_64"); "unknown CPU" where nothing does."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def compute_device() -> str:
    """What this process computes on: ``cpu``, or the GPU's name and its backend, e.g.
    ``NVIDIA H200 (cuda)`` (:func:`corelib.devices.default_device`). A record's ``machine`` is the
    exporting process's, which need not have trained it, so this is named where the process
    computes what it reports (``verify``, the benchmarks), not in exports."""
    device = default_device()
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (cuda)"
    return "Apple GPU (mps)" if device.type == "mps" else device.type


def computed_on(machine_info: dict[str, Any]) -> str:
    """The processor a ``machine`` entry names: its ``device`` where that is a GPU, else its CPU."""
    device = machine_info.get("device", "cpu")  # the recorded runs name no device: their CPU
    return machine_info.get("cpu", "?") if device == "cpu" else device


def _code() -> dict[str, Any]:
    return {"corelib": corelib_hash()[:CODE_DIGITS], "commit": git_commit()}


# ---------------------------------------------------------------- re-deriving a sample


def _verify_core_inflation(record: dict, epochs: int, tolerance: float) -> list[str]:
    params = modular_runs.ModularParams(**record["provenance"]["params"])
    snapshots = [r["epoch"] for r in record["arms"]["wd"] if r["epoch"] > params.branch_epoch]
    if epochs not in snapshots:  # a horizon between snapshots would add one the record does not have
        raise SystemExit(f"--epochs must be a recorded snapshot after the branch, e.g. {snapshots[:5]}; got {epochs}.")
    sample = modular_runs.ModularParams(
        **{**asdict(params), "epochs": min(params.epochs, epochs), "long_epochs": epochs}
    )
    kept, fresh = {}, {}
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(sample, arm, epochs)
        fresh[arm] = modular_runs.without_operators(modular_runs.analyse_arm(sample, arm, epochs))
        kept[arm] = modular_runs.without_operators([r for r in record["arms"][arm] if r["epoch"] <= epochs])
    return agreement.compare(
        kept,
        fresh,
        {k: v for arm in kept for k, v in agreement.snapshot_groups(kept[arm], arm).items()},
        {k: v for arm in fresh for k, v in agreement.snapshot_groups(fresh[arm], arm).items()},
        tolerance=tolerance,
    )


def _sweeps_sample(record: dict, label: str, n_seeds: int | None) -> tuple:
    """The condition ``label`` of a sweeps record, its configuration, the seeds to re-derive and
    their recorded records; a record that is not a sweeps record of this shape is refused here,
    before hours of recomputing."""
    try:
        params = SweepsParams(**record["provenance"]["params"])
    except (TypeError, ValueError, KeyError) as err:
        raise RecordRefused(f"its provenance.json holds no settings of the sweeps ({err})") from None
    try:
        cond, cfg = params.plan(label)
    except ValueError as err:
        raise SystemExit(f"the record: {err}") from None
    # The seeds train stacked; a smaller stack rounds differently in the last bits, which can move
    # a seed's threshold crossing by a step or two: only the whole stack is expected to match exactly.
    if n_seeds is not None and n_seeds < 1:
        raise SystemExit(f"--seeds must be at least 1 (or left out: every recorded seed); got {n_seeds}.")
    seeds = params.seeds if n_seeds is None else params.seeds[:n_seeds]
    records = record["records"]
    if not isinstance(records, list) or not records:
        raise RecordRefused(f"records.json must be a non-empty list of per-seed records, got {_kind(records)}")
    plans = {condition_key(c, f): (c, f) for c, f in params.plans()}
    for i, r in enumerate(records):
        known = plans.get(r.get("condition")) if isinstance(r, dict) and isinstance(r.get("condition"), str) else None
        if known is None:
            raise RecordRefused(f"records.json entry {i} is not a record of a condition of these sweeps: {_kind(r)}")
        problems = record_problems(r, *known, r.get("seed"))
        if problems:
            raise RecordRefused(f"records.json entry {i} ({known[0].label()}): {'; '.join(problems)}")
    # A condition shared by both sweeps is recorded twice, with the same records.
    key = condition_key(cond, cfg)
    kept = {r["seed"]: r for r in records if r["condition"] == key and r["seed"] in seeds}
    missing = [s for s in seeds if s not in kept]
    if missing:
        raise RecordRefused(f"records.json holds no record of {label} for the seeds {missing}")
    return cond, cfg, seeds, [kept[s] for s in seeds]


def _kind(value: object) -> str:
    text = " ".join(repr(value).split())
    return f"{type(value).__name__} {text[:80]}{' ...' if len(text) > 80 else ''}"


def _verify_grokking_sweeps(record: dict, label: str, n_seeds: int | None, tolerance: float) -> list[str]:
    cond, cfg, seeds, kept = _sweeps_sample(record, label, n_seeds)
    fresh = run_condition(cond, seeds, cfg, progress=True)
    return agreement.compare(
        {cond.label(): kept},
        {cond.label(): fresh},
        agreement.seed_record_groups(kept, SEED_TIMES, cond.label()),
        agreement.seed_record_groups(fresh, SEED_TIMES, cond.label()),
        tolerance=tolerance,
    )


def _verify_inflation_clock(record: dict, epochs: int, tolerance: float) -> list[str]:
    params = paper_scale.parameters_of(inflation_clock.ClockParams, record["provenance"]["params"], "inflation_clock")
    kept = [
        r["epoch"] for r in record["window"]["arms"]["kept"]["records"] if r["epoch"] <= record["window"]["grok_epoch"]
    ]
    snapshots = kept + [r["epoch"] for r in record["window"]["arms"]["removed"]["records"] if r["epoch"] > kept[-1]]
    if epochs not in snapshots:
        raise SystemExit(
            f"--epochs must be a recorded snapshot of the kept run up to the branch or of the removed arm after it, "
            f"e.g. {snapshots[:3]} ... {snapshots[-3:]}; got {epochs}."
        )
    typed = paper_scale.clock_record(record, params)
    return inflation_clock.record_agreement(params, typed, epochs, tolerance=tolerance)["agreement"]


def _verify_inflation_clock_window(record: dict, epochs: int, tolerance: float, folder: Path) -> Agreement:
    params = paper_scale.parameters_of(
        inflation_clock.ClockParams, record["provenance"]["params"], "inflation_clock_window"
    )
    return inflation_clock.window_sample_agreement(
        params,
        paper_scale.window_record(record, folder),
        WINDOW_SAMPLE_ARM,
        epochs,
        tolerance=tolerance,
        progress=False,
    )["agreement"]


# ---------------------------------------------------------------- shared


_EXPORTERS = {
    "core_inflation": export_core_inflation,
    "core_inflation_questions": export_questions,
    "grokking_sweeps": export_grokking_sweeps,
    "grokking_sweeps_moduli": export_grokking_sweeps_moduli,
    "inflation_clock": export_inflation_clock,
    "inflation_clock_window": export_inflation_clock_window,
}


def export(name: str, profile: str = "paper", root: Path | str | None = None, logs: list[Path] | None = None) -> Path:
    """Write the compact results and provenance of a finished ``profile`` run of ``name``; returns
    the folder. ``logs`` (grokking_sweeps only): the drivers' logs, for the wall time of each condition."""
    if logs and name != "grokking_sweeps":
        raise SystemExit(f"--logs serves grokking_sweeps only (the other runs keep their own time), not {name}.")
    missing = [str(f) for f in logs or [] if not Path(f).is_file()]
    if missing:
        raise SystemExit(f"no such log file: {', '.join(missing)}.")
    folder = recorded_path(name, profile, root)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    info = _EXPORTERS[name](profile, folder, **({"logs": [Path(f) for f in logs]} if logs else {}))
    save_json(
        folder / "provenance.json",
        {
            "experiment": name,
            "profile": profile,
            **info,
            "code": _code(),
            "machine": machine(),
            "exported": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        },
    )
    return folder


SEED_TIMES = ("t_mem", "t_gen", "delay")  # a sweep seed's record: the quantities the claims rest on


def verify(
    name: str,
    profile: str = "paper",
    *,
    epochs: int = 1000,
    condition: str = "p=53 wd=1 B=512",
    seeds: int | None = None,
    tolerance: float = 1e-6,
    root: Path | str | None = None,
) -> Agreement:
    """Re-derive a sample of a record from scratch and compare it with the record, exactly and at
    the level of the claims (:mod:`corelib.agreement`)."""
    from corelib.recorded import load_recorded

    try:
        record = load_recorded(name, profile, root)
        if record["provenance"].get("experiment") != name:
            raise RecordRefused(f"its provenance.json is {record['provenance'].get('experiment')!r}'s, not {name}'s")
        with fresh_results_root():
            return _verify(name, record, epochs, condition, seeds, tolerance, recorded_path(name, profile, root))
    except (StoreError, RecordRefused) as exc:
        folder = recorded_path(name, profile, root)
        raise SystemExit(
            f"{exc}"
            if isinstance(exc, StoreError)
            else f"the record {folder} is refused: {exc}; nothing was "
            f"recomputed. Restore it from git: `git checkout -- {_shown(folder)}` (or export it again)."
        ) from None


def _verify(
    name: str, record: dict, epochs: int, condition: str, seeds: int | None, tolerance: float, folder: Path
) -> Agreement:
    """:func:`verify` on the loaded ``record`` of ``name`` (kept in ``folder``)."""
    if name == "core_inflation":
        return _verify_core_inflation(record, epochs, tolerance)
    if name == "core_inflation_questions":
        return verify_questions(record, epochs, tolerance)
    if name == "inflation_clock":
        return _verify_inflation_clock(record, epochs, tolerance)
    if name == "inflation_clock_window":
        return _verify_inflation_clock_window(record, epochs, tolerance, folder)
    return _verify_grokking_sweeps(record, condition, seeds, tolerance)


class RecordRefused(ValueError):
    """A recorded run whose content is not what its experiment records: refused before any recompute."""


def _shown(folder: Path) -> Path:
    return folder.relative_to(PROJECT_ROOT) if folder.is_relative_to(PROJECT_ROOT) else folder


def _check_profile(command: str, profile: str) -> None:
    """Refuse a profile that ``profiles.yml`` does not define, naming the ones it does."""
    try:
        profile_table(profile)
    except ConfigError as exc:
        raise SystemExit(f"record {command} --profile {profile}: {exc}.") from None


def export_costs(profile: str, root: Path | str | None = None) -> Path:
    """Add the computed run times of ``profile`` in the results root to ``recorded/chapter_costs.json``
    (run after a cold build of that profile, with the machine to itself); returns the file."""
    from .run_times import COSTS_FILE, chapter_costs, recorded_run_times

    folder = Path(root) if root is not None else recorded_root()
    costs = chapter_costs(folder)
    found = [r for r in recorded_run_times() if r.get("profile") == profile and r.get("computed")]
    if not found:
        raise SystemExit(
            f"no chapter of the results root was computed with the {profile} profile; build it first "
            f"(`ace-book build --profile {profile}` on an empty results folder)."
        )
    here = machine()
    # A build on a GPU is timed on the GPU: its entries name it, not only the CPU beside it.
    device = {} if (gpu := compute_device()) == "cpu" else {"device": gpu}
    for r in found:
        keep = {k: r[k] for k in ("seconds", "threads", "finished", "commit") if k in r}
        costs["chapters"].setdefault(r["chapter"], {})[profile] = {**keep, "cpu": here["cpu"], **device}
    costs.setdefault("machine", here)  # the machine of the entries that name no CPU of their own
    folder.mkdir(parents=True, exist_ok=True)
    save_json(folder / COSTS_FILE, costs)
    return folder / COSTS_FILE


CLAIMS_FILE = "book_claims.json"  # in recorded/: every claim and finding as the book profile judged it


def export_claims(
    profile: str = "book",
    root: Path | str | None = None,
    missing_ok: bool = False,
    only: Sequence[str] | None = None,
) -> Path:
    """Write every claim and finding as the results root judges them (:func:`citation_rows`) to
    ``recorded/book_claims.json``: the statuses the chapters' sentences are checked against
    (``tests/test_citations.py``). Run after a build of ``profile`` in which every chapter with
    claims ran with that profile; anything else is refused before writing, unless ``missing_ok``:
    then the chapters not run are listed under ``not_run`` and their claims are judged on the
    recorded runs alone (a sentence citing anything else of theirs fails the test).

    ``only``: re-judge just these chapters' claims, after a build of them alone, and keep every
    other row of the file as it is (their commit and machine under ``updated``)."""
    from corelib.claims import CLAIMS, FINDINGS

    from .claims_page import citation_rows

    folder = Path(root) if root is not None else recorded_root()
    chapters = sorted({c.chapter for c in CLAIMS + FINDINGS})
    if only is not None:
        if missing_ok:
            raise SystemExit("--only re-judges chapters that were built; it does not take --missing-ok.")
        return _update_claims(folder / CLAIMS_FILE, profile, list(only), chapters)
    records, wrong = _claims_records(profile, chapters, missing_ok)
    rows = citation_rows(records)
    data = {
        "profile": profile,
        "exported": time.strftime("%Y-%m-%d %H:%M"),
        "commit": git_commit(),
        "machine": machine(),
        "not_run": sorted(wrong) if missing_ok else [],
        "rows": {cid: {k: row[k] for k in _CLAIM_FIELDS} for cid, row in rows.items()},
    }
    save_json(folder / CLAIMS_FILE, data)
    return folder / CLAIMS_FILE


_CLAIM_FIELDS = ("ours", "status", "within tolerance", "source", "this build")


def _claims_records(profile: str, chapters: list[str], missing_ok: bool) -> tuple[dict, dict]:
    """The results root's claim records, and the chapters among ``chapters`` not recorded with
    ``profile`` (refused unless ``missing_ok``: then only their recorded runs' values are kept)."""
    from corelib.claims import RECORDED_SUFFIX, load_records

    records = load_records()
    wrong = {ch: records.get(ch, {}).get("profile", "not run") for ch in chapters}
    wrong = {ch: p for ch, p in wrong.items() if p != profile}
    if missing_ok and len(wrong) == len(chapters):
        raise SystemExit(
            f"no chapter's claims were recorded with the {profile} profile in {results_root()}: that profile was "
            f"not built there, and recording it would mark every claim 'not run'. Nothing was written; build it "
            f"first (`ace-book build --profile {profile}`), or point ACE_RESULTS_DIR at the folder it was built in."
        )
    if missing_ok:  # a chapter not run keeps only what a recorded run measured for it
        records = {k: v for k, v in records.items() if k.endswith(RECORDED_SUFFIX) or k not in wrong}
    elif wrong:
        raise SystemExit(
            f"these chapters' claims were not recorded with the {profile} profile: {wrong}; build the book with "
            f"`ace-book build --profile {profile}` first."
        )
    return records, wrong


def _update_claims(path: Path, profile: str, only: list[str], chapters: list[str]) -> Path:
    """Re-judge ``only``'s claims in the file at ``path`` from the results root; keep the rest."""
    from corelib.claims import CLAIMS, FINDINGS

    from .claims_page import citation_rows

    unknown = sorted(set(only) - set(chapters))
    if unknown or not only:
        raise SystemExit(f"--only takes chapters with claims, some of {chapters}; got {only}.")
    if not path.exists():
        raise SystemExit(f"{path} does not exist yet: record every chapter once, without --only.")
    data = load_json(path)
    if data.get("profile") != profile:
        raise SystemExit(f"{path} holds the {data.get('profile')!r} profile's statuses, not the {profile!r} one's.")
    records, _ = _claims_records(profile, only, missing_ok=False)
    rows = citation_rows(records)
    mine = {c.id for c in CLAIMS + FINDINGS if c.chapter in only}
    data["rows"].update({cid: {k: rows[cid][k] for k in _CLAIM_FIELDS} for cid in sorted(mine)})
    data["rows"] = _known_rows(data["rows"])
    data["not_run"] = [ch for ch in data.get("not_run", []) if ch not in only]
    stamp = {"exported": time.strftime("%Y-%m-%d %H:%M"), "commit": git_commit(), "machine": machine()}
    data.setdefault("updated", {}).update({ch: stamp for ch in only})
    save_json(path, data)
    return path


def _known_rows(rows: dict[str, dict]) -> dict[str, dict]:
    """``rows`` in the order of :data:`CLAIMS` followed by :data:`FINDINGS`, the order the file
    lists them; the rows of ids the registry no longer has are dropped, and named."""
    from corelib.claims import CLAIMS, FINDINGS

    order = [c.id for c in CLAIMS + FINDINGS]
    stale = sorted(set(rows) - set(order))
    if stale:
        print(f"dropped the rows of claims the registry no longer has: {stale}", file=sys.stderr)
    return {cid: rows[cid] for cid in order if cid in rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m acebook.record", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="record a finished run's compact results and provenance")
    ex.add_argument("name", choices=sorted(_EXPORTERS))
    ex.add_argument("--profile", default="paper")
    ex.add_argument("--logs", nargs="+", type=Path, help="grokking_sweeps: the drivers' logs (wall time per condition)")
    co = sub.add_parser("costs", help="record the chapters' run times of a profile (after a cold build)")
    co.add_argument("--profile", default="book")
    cl = sub.add_parser("claims", help="record every claim's status as a build of a profile judged it")
    cl.add_argument("--profile", default="book")
    cl.add_argument("--missing-ok", action="store_true", help="list chapters not run instead of refusing")
    cl.add_argument("--only", nargs="+", help="re-judge only these chapters (after a build of them alone)")
    ve = sub.add_parser("verify", help="re-derive a sample of a record and compare")
    ve.add_argument("name", choices=sorted(_EXPORTERS))
    ve.add_argument("--profile", default="paper")
    ve.add_argument(
        "--epochs",
        type=int,
        default=1000,
        help="core_inflation, inflation_clock: epochs of the sample; inflation_clock_window: epochs after the branch",
    )
    ve.add_argument("--condition", default="p=53 wd=1 B=512", help="grokking_sweeps: the condition's label")
    ve.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="grokking_sweeps: only the first n seeds (default: all, as recorded; a smaller stack of seeds rounds "
        "differently and may move a crossing by a few steps)",
    )
    ve.add_argument("--tolerance", type=float, default=1e-6, help="absolute tolerance for floats")
    args = ap.parse_args(argv)
    _check_profile(args.command, args.profile)
    if args.command == "claims":
        print(
            f"recorded the {args.profile}-profile statuses in "
            f"{export_claims(args.profile, missing_ok=args.missing_ok, only=args.only)}"
        )
        return 0
    if args.command == "costs":
        print(f"recorded the {args.profile}-profile costs in {export_costs(args.profile)}")
        return 0
    if args.command == "export":
        folder = export(args.name, args.profile, logs=args.logs)
        print(f"recorded {args.name} ({args.profile}) in {folder}")
        return 0
    t0 = time.perf_counter()
    problems = verify(
        args.name,
        args.profile,
        epochs=args.epochs,
        condition=args.condition,
        seeds=args.seeds,
        tolerance=args.tolerance,
    )
    took = time.perf_counter() - t0
    info = provenance(args.name, args.profile)
    print(f"re-derived a sample of {args.name} ({args.profile}, recorded at {info['code']}) in {took:.0f} s")
    _report(problems, computed_on(info.get("machine", {})), computed_on({**machine(), "device": compute_device()}))
    return 0 if problems.agrees else 1


def _report(result: Agreement, recorded_on: str, here: str) -> None:
    """What ``verify`` prints: the exact comparison, then the comparison at the level of the claims."""
    if result.identical:
        print(f"bit-identical: all {result.n_values} values equal the record's (this machine rounds as the record's)")
    else:
        print(
            f"not bit-identical: {len(result.differences)} of {result.n_values} values moved (recorded on "
            f"{recorded_on}, re-derived on {here}); the first: {result.differences[0]}"
        )
    n = len(result.quantities)
    print(
        f"per seed, {result.n_moved} of {n} quantities moved; the largest change of a mean is "
        f"{result.largest_z:.2f} standard errors of the difference"
    )
    for q in result.quantities if len(result.quantities) <= 12 else result.beyond:
        print(
            f"  {q.name}: mean {q.recorded.mean():.6g} recorded, {q.rederived.mean():.6g} re-derived "
            f"(s.e. of the difference {q.seed_error:.3g}, allowed {q.allowed:.3g}; Welch t = {q.t:.2f}, p = {q.p:.2g})"
            + ("" if q.agrees else "  <- beyond the envelope")
        )
    print(
        "agrees with the record: every quantity within its envelope"
        if result.agrees
        else f"differs from the record: {len(result.beyond)} quantities moved beyond their envelope"
    )


if __name__ == "__main__":
    sys.exit(main())
