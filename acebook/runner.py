"""Execute the book's chapters with papermill and render the site with Jupyter Book.

Each chapter (see :mod:`acebook.project`) is converted with jupytext, executed with papermill
(kernel ``python3``, working directory = project root) with the parameters of its profile plus
the user's overrides, and written to ``book/chapters/<name>.ipynb``; ``jupyter-book build``
then renders ``_build/html``. The commands are ``build``, ``run`` and ``params``
(``python -m acebook.runner --help``; the README shows examples).

An executed chapter is reused until its source, its parameters or the code it runs
(``corelib/`` and ``acebook/``) change. A chapter that reads what other chapters saved declares
those folders of the results root in its jupytext header (``corelib_inputs: [claims]``); their
files are then part of its cache key, checked just before it would run (``recorded`` stands
for the recorded paper-scale results, ``recorded/`` or ``ACE_RECORDED_DIR``). A chapter that
keeps nothing in the results root says so (``corelib_stores_results: false``): each of its runs
is then a computation, whose time is its cost (:mod:`acebook.run_times`). While a chapter
executes, ``ACE_PROFILE`` holds the profile's name (:func:`corelib.claims.record` stores it).

A chapter's notebook and its parameters are :mod:`acebook.parameters`, the command line's parser
and flags :mod:`acebook.command_line` (their public names are importable from here too).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corelib import results
from corelib.claims import RECORDED_SUFFIX, claims_dir
from corelib.devices import DEVICE_VARIABLE
from corelib.recorded import recorded_root
from corelib.results import MANIFEST, results_root

from .command_line import (
    MAX_PARAMETERS_FILE,
    check_device_option,
    check_not_own_output,
    check_output,
    command_parser,
    file_overrides,
    parameter_overrides,
    print_chapters,
    print_parameters,
    take_parameters,
    write_reader_copy,
)
from .parameters import (
    KERNEL,
    chapter_parameters,
    check_parameters,
    check_values,
    inspect_notebook,
    notebook_parameters,
    parse_value,
    split_overrides,
    yaml_numbers,
)
from .project import (
    CHAPTER_DIR,
    PLACEHOLDER_REPOSITORY,
    ConfigError,
    RunnerError,
    chapters,
    check_chapter_name,
    check_environment,
    did_you_mean,
    output_path,
    profile_parameters,
    profile_table,
    progress_switch,
    project_root,
    repository_url,
    show_path,
    site_source_path,
    source_path,
)
from .run_times import RUN_TIMES, package_hash, record_run_time, results_written_since

__all__ = [
    "MAX_PARAMETERS_FILE",
    "ConfigError",
    "NotebookExecutionError",
    "RenderError",
    "RunnerError",
    "build_book",
    "cache_key",
    "chapter_parameters",
    "code_hash",
    "main",
    "notebook_parameters",
    "parse_value",
    "render_book",
    "run_notebook",
    "write_reader_copy",
]


RECORDED_INPUT = "recorded"  # in corelib_inputs: the recorded paper-scale results, not a results folder
METADATA_KEY = "acebook_runner"  # of an executed notebook's metadata: cache key, profile, parameters, time
_PAPERMILL_EXTRA_TAGS = {"injected-parameters", "papermill-error-cell-tag", "colab-install"}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookExecutionError(RunnerError):
    """A cell of a notebook raised; the partial notebook is kept at ``partial_path``."""

    def __init__(
        self, message: str, *, notebook: str, cell_index: int | None, partial_path: Path, traceback: str = ""
    ) -> None:
        super().__init__(message)
        self.notebook = notebook
        self.cell_index = cell_index
        self.partial_path = partial_path
        self.traceback = traceback


class RenderError(RunnerError):
    """``jupyter-book build`` failed (including Sphinx warnings turned into errors)."""


def code_hash(root: str | os.PathLike | None = None) -> str:
    """Hash of the code a chapter runs: ``corelib`` and ``acebook`` of the checkout ``root``."""
    return hashlib.sha256((package_hash("corelib", root) + package_hash("acebook", root)).encode()).hexdigest()


def cache_key(source_text: str, parameters: Mapping[str, Any], library_hash: str) -> str:
    """Cache key of an execution: source text, canonical JSON parameters, :func:`code_hash`."""
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"), default=repr)
    digest = hashlib.sha256()
    for part in (source_text, canonical, library_hash):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


@dataclass
class _Job:
    name: str
    converted: Path
    parameters: dict[str, Any]
    key: str
    profile: str
    inputs: tuple[str, ...] = ()
    stores_results: bool = True

    def cached(self, root: Path) -> bool:
        keys = {_stored_key(output_path(self.name, root)), _stored_key(site_source_path(self.name, root))}
        return keys == {self.key}

    def refresh_key(self) -> None:
        """Fold the current contents of the declared input folders into the cache key."""
        if self.inputs:
            # its own run-time record changes with every run of it: not an input of it
            own = f"{RUN_TIMES}/{self.name}.json"
            self.key = cache_key(self.key, {"inputs": _inputs_digest(self.inputs, skip=own)}, "")


def _inputs_digest(inputs: tuple[str, ...], skip: str | None = None) -> str:
    """sha256 over the files of the folders ``inputs`` of the results root (missing = empty);
    ``recorded`` names the recorded paper-scale results (:func:`corelib.recorded.recorded_root`).

    ``skip``: one file (``folder/name``, relative to the results root) left out.
    """
    digest = hashlib.sha256()
    for name in inputs:
        base = recorded_root() if name == RECORDED_INPUT else results_root() / name
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            # The store's manifest and lock files follow the data files; the data is what counts.
            if path.name == MANIFEST or path.name.startswith("."):
                continue
            if path.is_file() and f"{name}/{path.relative_to(base).as_posix()}" != skip:
                digest.update(f"{name}/{path.relative_to(base).as_posix()}".encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _stored_key(path: Path) -> str | None:
    try:
        return json.loads(path.read_text())["metadata"][METADATA_KEY]["cache_key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _plan(
    name: str,
    profile: str,
    overrides: Mapping[str, Any],
    root: Path,
    library_hash: str,
    inspected: tuple[Path, dict[str, dict[str, Any]]] | None = None,
) -> _Job:
    """Validate the parameters and compute the cache key -- before any execution."""
    params = {k: yaml_numbers(v) for k, v in profile_parameters(name, profile, root).items()}
    converted, declared = inspected or inspect_notebook(name, root)
    check_parameters(name, params, declared, f"from profile {profile!r} in profiles.yml")
    check_parameters(name, overrides, declared, "from the overrides")
    params.update(overrides)
    check_values(name, params, declared)
    # the results folder too: a chapter run against another (e.g. empty) one must run again
    where = {
        "parameters": params,
        "results": str(results_root().resolve()),
        "repository": repository_url(root),  # written into the Colab cell
        "device": os.environ.get(DEVICE_VARIABLE),  # --device
    }
    key = cache_key(source_path(name, root).read_text(), where, library_hash)
    return _Job(
        name, converted, params, key, profile, _declared_inputs(name, converted), _stores_results(name, converted)
    )


def _stores_results(name: str, converted: Path) -> bool:
    """False when a notebook's header declares ``corelib_stores_results: false`` (see the module docstring)."""
    import nbformat

    value = nbformat.read(converted, as_version=4).metadata.get("corelib_stores_results", True)
    if not isinstance(value, bool):
        raise ConfigError(f"notebook {name!r}: corelib_stores_results must be true or false; got {value!r}")
    return value


def _declared_inputs(name: str, converted: Path) -> tuple[str, ...]:
    """The ``corelib_inputs`` folders a notebook's header declares (see the module docstring)."""
    import nbformat

    inputs = nbformat.read(converted, as_version=4).metadata.get("corelib_inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(i, str) and i and "/" not in i for i in inputs):
        raise ConfigError(
            f"notebook {name!r}: corelib_inputs must be a list of folder names of the "
            f"results root, e.g. [claims]; got {inputs!r}"
        )
    return tuple(inputs)


def _source_line(py_text: str, cells: list, index: int) -> int | None:
    """1-based line in the py:percent source where ``cells[index]`` starts (best effort)."""
    lines = [line.rstrip() for line in py_text.splitlines()]
    pos, found, skipped = 0, None, 0
    for cell in cells[: index + 1]:
        source = cell.source.splitlines()
        skipped = next((k for k, ln in enumerate(source) if ln.strip()), None)
        if skipped is None:
            continue
        first = source[skipped].rstrip()
        wanted = {first} if cell.cell_type == "code" else {first, "# " + first.lstrip("# ")}
        found = next((j for j in range(pos, len(lines)) if lines[j] in wanted), None)
        if found is not None:
            pos = found + 1
    return None if found is None else found + 1 - skipped


def _execution_error(job: _Job, root: Path, partial: Path, exc: BaseException) -> NotebookExecutionError:
    """Describe the failing cell of the partial notebook (numbered as in the source)."""
    import nbformat

    index, where, error, traceback = None, "", f"{type(exc).__name__}: {exc}", ""
    try:
        nb = nbformat.read(partial, as_version=4)
    except (OSError, ValueError):
        nb = None
    cells = [c for c in (nb.cells if nb else []) if not _PAPERMILL_EXTRA_TAGS & set(c.metadata.get("tags", []))]
    for i, cell in enumerate(cells):
        out = next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)
        if out is None:
            continue
        index, error = i, f"{out.ename}: {out.evalue}"
        traceback = _ANSI.sub("", "\n".join(out.traceback))
        first_line = next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "")
        where = f" in cell {index} (first line: {first_line!r})"
        line = _source_line(source_path(job.name, root).read_text(), cells, i)
        if line is not None:  # the failing line inside the cell, from "Cell In[3], line 2"
            in_cell = re.search(r"Cell In\[\d*\], line (\d+)", traceback)
            line += int(in_cell[1]) - 1 if in_cell else 0
            where += f", at notebooks/{job.name}.py:{line}"
        break
    message = (
        f"notebook {job.name!r} failed{where}\n    {error}\n"
        f"The partially executed notebook is kept at {show_path(partial)}"
    )
    return NotebookExecutionError(
        message, notebook=job.name, cell_index=index, partial_path=partial, traceback=traceback
    )


def _kernel_config() -> dict[str, Any]:
    """Encrypt kernel traffic when possible (silences ipykernel's plain-TCP warning)."""
    import zmq
    from traitlets.config import Config

    if not zmq.has("curve"):
        return {}
    return {"config": Config({"KernelManager": {"transport_encryption": "auto"}})}


def _forward_progress() -> bool:
    """Whether a chapter's own progress bars go to our stderr: as ``ACE_PROGRESS`` says, else on a terminal."""
    switch = progress_switch()
    return sys.stderr.isatty() if switch is None else switch


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a chapter: the message says where its partial notebook is kept."""


def _keep_partial(job: _Job, running: Path, failed: Path) -> None:
    failed.parent.mkdir(parents=True, exist_ok=True)
    if running.exists():
        shutil.move(running, failed)
    else:
        shutil.copy(job.converted, failed)


def _execute(job: _Job, root: Path) -> Path:
    """Execute a planned notebook with papermill; raise NotebookExecutionError on failure."""
    import nbformat
    import papermill

    target, site = output_path(job.name, root), site_source_path(job.name, root)
    failed = root / "_build" / "failed" / f"{job.name}.ipynb"
    running = root / "_build" / "runner" / f"{job.name}.ipynb"
    for stale in (target, site, failed, running):
        stale.unlink(missing_ok=True)  # never leave an old result looking current
    results.remove(claims_dir() / f"{job.name}.json")
    results.remove(claims_dir() / f"{job.name}{RECORDED_SUFFIX}.json")
    start, started = time.perf_counter(), time.time()
    previous_profile = os.environ.get("ACE_PROFILE")
    os.environ["ACE_PROFILE"] = job.profile  # inherited by the kernel
    forward_progress = _forward_progress()
    if forward_progress:
        print(f"{job.name}: executing ({job.profile} profile)", file=sys.stderr, flush=True)
    try:
        papermill.execute_notebook(
            str(job.converted),
            str(running),
            parameters=job.parameters,
            kernel_name=KERNEL,
            cwd=str(root),
            log_output=False,
            # the chapter's own progress bars (training epochs, snapshots, sweep seeds: tqdm on
            # the kernel's stderr) reach the terminal as they are drawn
            stderr_file=sys.stderr if forward_progress else None,
            progress_bar=False if forward_progress else {"desc": f"  {job.name}", "leave": False, "disable": None},
            **_kernel_config(),
        )
    except KeyboardInterrupt:
        _keep_partial(job, running, failed)
        raise Interrupted(f"interrupted; the partially executed notebook is kept at {show_path(failed)}") from None
    except Exception as exc:  # papermill raises PapermillExecutionError, nbclient others
        _keep_partial(job, running, failed)
        raise _execution_error(job, root, failed, exc) from None
    finally:
        if previous_profile is None:
            os.environ.pop("ACE_PROFILE", None)
        else:
            os.environ["ACE_PROFILE"] = previous_profile
    nb = nbformat.read(running, as_version=4)
    seconds = round(time.perf_counter() - start, 2)
    nb.metadata[METADATA_KEY] = {
        "cache_key": job.key,
        "profile": job.profile,
        "parameters": job.parameters,
        "source": f"notebooks/{job.name}.py",
        "seconds": seconds,
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_both(nb, running, site, target)
    computed = results_written_since(started) or not job.stores_results
    record_run_time(job.name, job.profile, seconds, computed=computed, root=root)
    return target


def _write_both(nb: Any, running: Path, site: Path, target: Path) -> None:
    """The site's source (roles intact), then the reader's copy (numbers in the prose), each
    written whole before it takes its place."""
    import nbformat

    nbformat.write(nb, running)
    os.replace(running, site)
    refresh_reader_copy(site, target)


def refresh_reader_copy(site: Path, target: Path, rows: Mapping[str, Any] | None = None) -> None:
    """Write the reader's copy ``target`` of the executed chapter ``site`` (its ``.mystnb``), its
    verdicts judged by ``rows`` (default: the claims as recorded now). A role whose value the
    notebook lacks is a RunnerError naming it; the executed notebook stays where it is."""
    import nbformat

    from .claims_page import citation_rows
    from .reader import reader_copy

    try:
        copy = reader_copy(nbformat.read(site, as_version=4), citation_rows() if rows is None else rows)
    except KeyError as exc:
        raise RunnerError(
            f"{show_path(site)}: {exc.args[0]}; glue that value in the chapter, or correct the role "
            "(the executed notebook is kept; the site renders from it)."
        ) from None
    text = nbformat.writes(copy)
    text += "" if text.endswith("\n") else "\n"
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return  # unchanged: a cached chapter keeps its file as it was
    tmp = target.with_name(target.name + ".writing")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _refresh_reader_copies(names: list[str], root: Path) -> None:
    """Every executed chapter's reader's copy judged on the claims of the whole build: a chapter
    may cite a result that a later chapter records."""
    from .claims_page import citation_rows

    rows = citation_rows()
    for name in names:
        if site_source_path(name, root).exists():
            refresh_reader_copy(site_source_path(name, root), output_path(name, root), rows)


def _run_jobs(jobs: list[_Job], root: Path, force: bool) -> dict[str, dict[str, Any]]:
    from tqdm import tqdm

    timings: dict[str, dict[str, Any]] = {}
    bar = tqdm(jobs, desc="notebooks", unit="nb", disable=len(jobs) < 2)
    for job in bar:
        bar.set_postfix_str(job.name)
        start = time.perf_counter()
        job.refresh_key()  # after the chapters before it have run
        cached = not force and job.cached(root)
        if not cached:
            _execute(job, root)
        seconds = round(time.perf_counter() - start, 2)
        timings[job.name] = {"profile": job.profile, "cached": cached, "seconds": seconds, "parameters": job.parameters}
        _write_timings(root, timings)
        tqdm.write(f"{job.name}: {'cached' if cached else 'executed'} in {seconds:.1f} s")
    bar.close()
    return timings


def _write_timings(root: Path, notebooks: Mapping[str, Any], render: Mapping[str, Any] | None = None) -> None:
    """Merge per-notebook (and render) wall times into ``_build/timings.json``."""
    path = root / "_build" / "timings.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.setdefault("notebooks", {}).update(notebooks)
    if render is not None:
        data["render"] = render
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=repr) + "\n")


# --------------------------------------------------------------------------- public API


def run_notebook(
    name: str,
    profile: str = "book",
    overrides: Mapping[str, Any] | None = None,
    *,
    force: bool = False,
    root: str | os.PathLike | None = None,
) -> Path:
    """Execute one notebook and return the path of the executed ``.ipynb``.

    Parameters are those of ``profile`` for ``name``, updated with ``overrides``.
    Unknown parameter names raise :class:`ConfigError` before execution; a failing
    cell raises :class:`NotebookExecutionError`.  An up-to-date cached result is
    reused unless ``force`` is true.
    """
    root = project_root(root)
    check_chapter_name(name, root)  # before anything: a name that is a path is never opened
    job = _plan(name, profile, dict(overrides or {}), root, code_hash(root))
    _run_jobs([job], root, force)
    return output_path(name, root)


def build_book(
    profile: str = "book",
    *,
    only: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    force: bool = False,
    render: bool = True,
    root: str | os.PathLike | None = None,
) -> Path:
    """Execute the chapters of ``_toc.yml`` (or just ``only``) and render the book.

    ``overrides`` maps parameter names to values: ``"param"`` applies to every
    selected notebook declaring it (at least one must), ``"notebook.param"`` to
    one notebook.  All notebooks are validated before the first one runs.
    Returns ``_build/html/index.html`` if ``render`` else the chapter directory.
    """
    root = project_root(root)
    names = chapters(root)
    selected = list(only) if only else names
    missing = [n for n in selected if n not in names]
    if missing:
        raise ConfigError(
            f"not a chapter of _toc.yml: {', '.join(missing)}{did_you_mean(missing[0], names)} "
            f"(chapters: {', '.join(names) or 'none'})"
        )
    profile_table(profile, root)  # fail early on an unknown profile
    if render:
        for name in (n for n in names if n not in selected):
            if not site_source_path(name, root).exists():
                raise ConfigError(
                    f"chapter {name!r} has never been executed; build it too (or all chapters), or pass --no-render"
                )
            print(f"{name}: not re-run; rendering the existing {show_path(output_path(name, root))}")
    library_hash = code_hash(root)
    inspected = {n: inspect_notebook(n, root) for n in selected}
    declared = {n: params for n, (_, params) in inspected.items()}
    per_notebook = split_overrides(dict(overrides or {}), declared)
    jobs = [_plan(n, profile, per_notebook[n], root, library_hash, inspected[n]) for n in selected]
    _run_jobs(jobs, root, force)
    _refresh_reader_copies(names, root)
    return render_book(root) if render else root / CHAPTER_DIR


def render_book(root: str | os.PathLike | None = None) -> Path:
    """Run ``jupyter-book build`` (warnings are errors) and return ``_build/html/index.html``."""
    root = project_root(root)
    if repository_url(root) == PLACEHOLDER_REPOSITORY:
        print(
            f"warning: _config.yml's repository.url is still the placeholder {PLACEHOLDER_REPOSITORY}: the "
            "Binder and Colab buttons and the Colab install cell point to it; set the published URL.",
            file=sys.stderr,
        )
    exe = Path(sys.executable).parent / "jupyter-book"
    command = [
        str(exe) if exe.exists() else "jupyter-book",
        "build",
        str(root),
        "--all",
        "-W",
        "-n",
        "--keep-going",
        "--quiet",
    ]
    start = time.perf_counter()
    print("rendering:", " ".join(command[1:]), flush=True)
    try:
        result = subprocess.run(command, cwd=root)
    except FileNotFoundError:
        raise RenderError("jupyter-book is not installed (pip install 'jupyter-book<2')") from None
    seconds = round(time.perf_counter() - start, 2)
    _write_timings(root, {}, {"seconds": seconds, "ok": result.returncode == 0})
    index = root / "_build" / "html" / "index.html"
    if result.returncode != 0 or not index.exists():
        raise RenderError(
            f"jupyter-book build failed (exit code {result.returncode}); Sphinx warnings are errors, see the log above"
        )
    print(f"rendered in {seconds:.1f} s: {show_path(index)}")
    return index


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``ace-book``, ``python -m acebook.runner``); returns the exit status."""
    argv, pairs = take_parameters(list(sys.argv[1:] if argv is None else argv))
    args = command_parser().parse_args(argv)
    if pairs and not hasattr(args, "parameter"):
        command_parser().error(f"-p is an option of build and run, not of {args.command}")
    if pairs:
        args.parameter = pairs + args.parameter
    try:
        if args.command == "reader":
            print(show_path(write_reader_copy(args.notebook, args.output)))
            return 0
        if args.command == "params":
            print_parameters(args.name, args.root)
            return 0
        if args.command == "list":
            if args.profile is not None:
                profile_table(args.profile, args.root)  # an unknown profile is an error here too
            print_chapters(args.root, args.profile)
            return 0
        check_environment(device=not args.device)  # as the flags: before a kernel starts
        overrides = file_overrides(args.parameters_file)
        overrides.update(parameter_overrides(args.parameter))
        if args.device:
            check_device_option(args.device)  # whatever is cached: a wrong device is an error now
            os.environ[DEVICE_VARIABLE] = args.device  # the kernels inherit it
        if args.command == "run":
            if args.output:
                check_output(args.output)  # before the chapter runs, not after
                check_not_own_output(args.output, args.name, args.root)
            executed = run_notebook(args.name, args.profile, overrides, force=args.force, root=args.root)
            if args.output:
                args.output.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(executed, args.output)
                executed = args.output
            print(show_path(executed))
        else:
            print(
                show_path(
                    build_book(
                        args.profile,
                        only=args.only,
                        overrides=overrides,
                        force=args.force,
                        render=not args.no_render,
                        root=args.root,
                    )
                )
            )
        return 0
    except NotebookExecutionError as exc:
        if exc.traceback:
            print(exc.traceback, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except RunnerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    except KeyboardInterrupt as exc:
        print(str(exc) or "interrupted", file=sys.stderr)  # one line, no kernel traceback
        return 130


if __name__ == "__main__":
    sys.exit(main())
