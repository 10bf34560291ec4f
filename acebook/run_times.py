"""Run-time records: how long each chapter took to compute its results, and which code ran.

The runner writes one record per chapter to ``run_times/`` of the results root after a
successful execution; the claims page lists them as the cost of reproducing the book. Stored
results are keyed by their parameters, not by the code, so a record also names the code that
computed them (the commit and a hash of ``corelib``).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corelib.claims import claims_dir
from corelib.recorded import recorded_root
from corelib.results import json_files, load_json, results_root, save_json

from .project import RunnerError, chapters, profile_parameters, project_root

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CODE_DIGITS",
    "RUN_TIMES",
    "code_label",
    "corelib_hash",
    "git_commit",
    "package_hash",
    "record_run_time",
    "recorded_run_times",
    "results_written_since",
    "COSTS_FILE",
    "chapter_costs",
    "ChapterCost",
    "chapter_cost",
    "GPU_TIMES_FILE",
    "GpuPaperTimes",
    "gpu_paper_times",
]

RUN_TIMES = "run_times"  # folder of the results root
COSTS_FILE = "chapter_costs.json"  # in recorded/: each chapter's measured cost per profile
CODE_DIGITS = 12  # of the corelib hash kept in a record: enough to tell versions apart


def package_hash(package: str, root: str | os.PathLike | None = None) -> str:
    """sha256 over the paths and contents of the ``<package>/**/*.py`` files of the checkout
    ``root`` (the hash of nothing when the folder does not exist)."""
    base = project_root(root) / package
    digest = hashlib.sha256()
    for path in sorted(base.rglob("*.py")) if base.is_dir() else []:
        digest.update(path.relative_to(base).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def corelib_hash(root: str | os.PathLike | None = None) -> str:
    """:func:`package_hash` of ``corelib``: the version of the code that computes results."""
    return package_hash("corelib", root)


def git_commit(root: str | os.PathLike | None = None) -> str | None:
    """Short commit of the checkout ``root``, with ``+modified`` when the code a chapter runs
    (``corelib/``, ``acebook/``, ``notebooks/``) differs from it; None outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(project_root(root)), *args], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        modified = git("status", "--porcelain", "--", "corelib", "acebook", "notebooks")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+modified" if modified else "")


def _threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def results_written_since(started: float) -> bool:
    """Whether an execution stored results: a file under the results root, other than the run
    times and the recorded claims, modified at or after ``started`` (a ``time.time()``)."""

    def modified(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:  # replaced by an atomic write while we looked
            return started

    skip = {results_root() / RUN_TIMES, claims_dir()}
    for folder, dirs, files in os.walk(results_root()):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip]
        if any(modified(Path(folder, f)) >= started for f in files):
            return True
    return False


def record_run_time(
    chapter: str, profile: str, seconds: float, *, computed: bool, root: str | os.PathLike | None = None
) -> None:
    """Record a chapter's wall time and code version, unless it only read back stored results
    and a record of the same profile exists.

    A run on stored results takes a fraction of the time of the run that computed them; the
    record keeps that run's time and code version, since it stands for the cost of the results.
    """
    folder = results_root() / RUN_TIMES
    path = folder / f"{chapter}.json"
    if not computed and path.exists() and load_json(path).get("profile") == profile:
        return
    folder.mkdir(parents=True, exist_ok=True)
    save_json(
        path,
        {
            "chapter": chapter,
            "profile": profile,
            "seconds": seconds,
            "computed": computed,
            "threads": _threads(),
            "finished": time.strftime("%Y-%m-%d %H:%M", time.localtime()),
            "corelib": corelib_hash(root)[:CODE_DIGITS],
            "commit": git_commit(root),
        },
    )


def recorded_run_times(
    folder: str | os.PathLike | None = None, root: str | os.PathLike | None = None
) -> list[dict[str, Any]]:
    """The run-time record of each executed chapter, in chapter order.

    A record holds ``chapter``, ``profile``, ``seconds``, ``threads`` (CPUs the process could
    use), ``finished``, ``computed`` (whether the run stored results rather than only reading
    them back), ``corelib`` (the start of :func:`corelib_hash`) and ``commit``
    (:func:`git_commit`). Each also gets ``same_code``: whether its ``corelib`` matches the
    checkout ``root`` now (None for a record without a code version). ``folder`` defaults to
    ``run_times/`` of the results root.
    """
    base = Path(folder) if folder is not None else results_root() / RUN_TIMES
    records = [load_json(p) for p in json_files(base)]
    current = corelib_hash(root)[:CODE_DIGITS]
    for record in records:
        record["same_code"] = record["corelib"] == current if "corelib" in record else None
    try:
        order = {name: i for i, name in enumerate(chapters(root))}
    except (OSError, RunnerError):
        order = {}
    return sorted(records, key=lambda r: (order.get(r["chapter"], len(order)), r["chapter"]))


def code_label(record: Mapping[str, Any]) -> str:
    """How a run-time record names the code that ran: its commit (else the corelib hash), marked
    "(other corelib)" when that corelib differs from the checkout's now; "not recorded" for a
    record without a code version."""
    if "corelib" not in record:
        return "not recorded"
    label = record.get("commit") or f"corelib {record['corelib']}"
    return label if record.get("same_code", True) else f"{label} (other corelib)"


def chapter_costs(folder: str | os.PathLike | None = None) -> dict[str, Any]:
    """The committed cost of each chapter, ``{"machine": ..., "chapters": {name: {profile: record}}}``,
    from ``recorded/chapter_costs.json`` (written by ``python -m acebook.record costs``); empty
    chapters when none was recorded."""
    path = Path(folder if folder is not None else recorded_root()) / COSTS_FILE
    return load_json(path) if path.exists() else {"machine": {}, "chapters": {}}


_CPU_NOISE = re.compile(
    r"\((?:R|TM|tm|r)\)|@.*$|\b(?:CPU|Processor|processor|with .*|\d+-Core|\d+-core)\b|(?:^|\s)\d+(?:th|rd|nd|st) Gen\b"
)


def short_cpu_name(name: str, words: int = 3) -> str:
    """A CPU's name in at most ``words`` words, its trademarks, clock and filler left out:
    "Intel(R) Xeon(R) Processor @ 2.50GHz" → "Intel Xeon", "AMD EPYC 7B13" → "AMD EPYC 7B13";
    "a CPU" for an empty name."""
    kept = _CPU_NOISE.sub(" ", name).split()
    return " ".join(kept[:words]) or "a CPU"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


@dataclass(frozen=True)
class ChapterCost:
    """What computing a chapter costs on the machine it was timed on: the values its header glues.

    The header's sentence is written in the chapter; these are the values it cites:

    - ``machine``: the threads and CPU it was timed on, e.g. ``"2 CPU threads (AMD EPYC)"``
      (:func:`short_cpu_name`), ``"2 CPU threads (CPU not recorded)"``, or for a build timed on
      a GPU ``"one GPU (NVIDIA H100 80GB)"``;
    - ``book``: the time with the book's settings, e.g. ``"about 6 minutes"``, or ``"not measured yet"``;
    - ``paper``: the time with the paper's settings, ``"not timed"``, or, where the paper's settings
      are the book's, the book's time marked ``"(same settings)"``.
    """

    machine: str
    book: str
    paper: str


def chapter_cost(chapter: str, folder: str | os.PathLike | None = None) -> ChapterCost:
    """The :class:`ChapterCost` of ``chapter`` from ``recorded/chapter_costs.json`` (or ``folder``)."""
    costs = chapter_costs(folder)
    entry = costs["chapters"].get(chapter, {})
    book, paper = entry.get("book"), entry.get("paper")
    if book is None:
        return ChapterCost("a reference machine", "not measured yet", "not measured yet")
    # The CPU the time was measured on; an entry that did not record it says so, rather than
    # naming the machine of a later export.
    cpu = short_cpu_name(book["cpu"]) if book.get("cpu") else "CPU not recorded"
    threads = book.get("threads", "?")
    where = f"{threads} CPU thread{'' if threads == 1 else 's'} ({cpu})"
    if book.get("device"):  # timed on a GPU, e.g. "NVIDIA H100 80GB HBM3 (cuda)"
        where = f"one GPU ({short_cpu_name(book['device'].rsplit(' (', 1)[0])})"
    book_time = f"about {_duration(book['seconds'])}"
    if paper is not None:
        paper_time = f"about {_duration(paper['seconds'])}"
    elif profile_parameters(chapter, "paper") == profile_parameters(chapter, "book"):
        paper_time = f"{book_time} (same settings)"
    else:
        paper_time = "not timed"
    return ChapterCost(where, book_time, paper_time)


GPU_TIMES_FILE = "paper_profile_gpu.json"  # in recorded/: benchmarks/paper_profile_times.py on a GPU


@dataclass(frozen=True)
class GpuPaperTimes:
    """The paper profile timed on a GPU (``recorded/paper_profile_gpu.json``): the values the claims
    page cites.

    - ``device``: the GPU, e.g. ``"NVIDIA H200 (cuda)"``; ``measured``: the date;
    - ``inflation``, ``sweeps``: the training time of the recorded runs on the GPU, scaled from
      slices, e.g. ``"about 31 minutes"``; ``inflation_cpu``, ``sweeps_cpu``: the recorded runs'
      own time on their CPU;
    - ``inflation_z``, ``sweeps_z``: the largest change of a seed mean, in standard errors of the
      difference, when a sample of each record was re-derived on the GPU; ``agrees``: whether
      both re-derivations agreed with their records at the level of the claims;
      ``inflation_epochs``: the epochs of core inflation re-derived; ``sweeps_condition``: the
      sweep condition re-derived, e.g. ``"p=53 wd=3 B=512"``;
    - ``table``: one row per arm and sweep condition, columns ``run``, ``part``, ``gpu_minutes``,
      ``cpu_minutes`` (the record's CPU) and ``speed_up``.
    """

    device: str
    measured: str
    inflation: str
    inflation_cpu: str
    sweeps: str
    sweeps_cpu: str
    inflation_z: float
    sweeps_z: float
    agrees: bool
    inflation_epochs: int
    sweeps_condition: str
    table: pd.DataFrame


def gpu_paper_times(folder: str | os.PathLike | None = None) -> GpuPaperTimes | None:
    """The :class:`GpuPaperTimes` recorded in ``recorded/`` (or ``folder``); None where none is."""
    path = Path(folder if folder is not None else recorded_root()) / GPU_TIMES_FILE
    if not path.exists():
        return None
    rec = load_json(path)
    rows = [
        ("core inflation", a["arm"], a["seconds"], a["recorded_cpu_seconds"]) for a in rec["core_inflation"]["arms"]
    ]
    rows += [
        ("sweeps", c["condition"], c["seconds"], c["recorded_cpu_seconds"])
        for c in rec["grokking_sweeps"]["conditions"]
    ]
    import pandas as pd

    table = pd.DataFrame(rows, columns=["run", "part", "gpu_seconds", "cpu_seconds"])
    table["speed_up"] = (table["cpu_seconds"] / table["gpu_seconds"]).round(1)
    table[["gpu_minutes", "cpu_minutes"]] = (table[["gpu_seconds", "cpu_seconds"]] / 60).round(1)
    totals, checks = rec["totals_seconds"], rec["rederived"]
    return GpuPaperTimes(
        device=rec["machine"]["device"],
        measured=rec["measured"],
        inflation=f"about {_duration(totals['core_inflation'])}",
        inflation_cpu=f"about {_duration(totals['core_inflation_recorded_cpu'])}",
        sweeps=f"about {_duration(totals['grokking_sweeps'])}",
        sweeps_cpu=f"about {_duration(totals['grokking_sweeps_recorded_cpu'])}",
        inflation_z=checks["core_inflation"]["largest_change_of_a_mean_in_standard_errors"],
        sweeps_z=checks["grokking_sweeps"]["largest_change_of_a_mean_in_standard_errors"],
        agrees=all(c["agrees"] for c in checks.values()),
        inflation_epochs=checks["core_inflation"]["epochs"],
        sweeps_condition=checks["grokking_sweeps"]["condition"],
        table=table[["run", "part", "gpu_minutes", "cpu_minutes", "speed_up"]],
    )
