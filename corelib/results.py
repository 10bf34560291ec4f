"""Results on disk: one folder per run, keyed by a hash of its parameters; every file verified on read.

A run folder holds ``params.json`` (what was run) and what the run produced: JSON for numbers and
records, safetensors for tensors. Every folder the store writes into holds ``manifest.json``, the
SHA-256 of each file in it (and a digest of the manifest itself). A file is written whole under a
name private to the writing process and renamed into place, and the manifest entry is updated
under the folder's lock, so two processes may write into one folder. Reading a file checks it
against the manifest: a damaged, edited, truncated or unrecorded file raises :class:`StoreError`
naming the file and the fix. :func:`run_lock` serialises whole computations on one folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock, Timeout

from .untrusted import UntrustedError, manifest_digest, manifest_files

if TYPE_CHECKING:  # torch is imported by the functions that store tensors: the command lines start without it
    import torch

__all__ = [
    "StoreError",
    "results_root",
    "fresh_results_root",
    "params_key",
    "run_dir",
    "save_json",
    "load_json",
    "save_tensors",
    "load_tensors",
    "remove",
    "copy_file",
    "save_bytes",
    "stored_files",
    "json_files",
    "compute_once",
    "run_lock",
    "run_busy",
    "claimed",
    "MANIFEST",
    "PROJECT_ROOT",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "manifest.json"
_FIX = "delete it (or the whole run folder) to recompute it"


class StoreError(ValueError):
    """A stored file that must not be used: damaged, edited, unrecorded, or from another run."""


def results_root() -> Path:
    """Folder holding all runs: ``$ACE_RESULTS_DIR`` or ``results/`` in the project (also when the
    variable is set but empty: an empty path would be the working directory)."""
    return Path(os.environ.get("ACE_RESULTS_DIR") or PROJECT_ROOT / "results")


@contextlib.contextmanager
def fresh_results_root() -> Iterator[Path]:
    """An empty temporary results root for the duration of the block (``ACE_RESULTS_DIR`` is set
    to it and restored after): whatever runs inside computes from scratch, and it is deleted after."""
    old = os.environ.get("ACE_RESULTS_DIR")
    with tempfile.TemporaryDirectory(prefix="ace-fresh-") as tmp:
        os.environ["ACE_RESULTS_DIR"] = tmp
        try:
            yield Path(tmp)
        finally:
            if old is None:
                os.environ.pop("ACE_RESULTS_DIR", None)
            else:
                os.environ["ACE_RESULTS_DIR"] = old


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"cannot store {type(x).__name__} as JSON; use numbers, strings, lists and dicts.")


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=_jsonable)


def params_key(params: dict) -> str:
    """Short stable hash of a parameter dictionary (key order does not matter)."""
    return hashlib.sha256(_canonical(params).encode()).hexdigest()[:16]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_LOCKS: dict[tuple[str, int], FileLock] = {}


def _lock(path: Path) -> FileLock:
    """One lock object per file and thread: a thread may re-enter a lock it holds, and threads
    (like processes) exclude each other, since each object holds its own OS file lock."""
    key = (str(path.resolve()), threading.get_ident())
    if key not in _LOCKS:
        _LOCKS[key] = FileLock(key[0], thread_local=False)
    return _LOCKS[key]


_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _cannot_write(folder: Path, exc: OSError) -> StoreError:
    """The message for a folder the store cannot write into: which folder, why, and what to do."""
    if exc.errno == errno.ENOSPC:
        fix = "free some space on that disk, or point ACE_RESULTS_DIR at a folder on another one"
    elif exc.errno in _NOT_WRITABLE:
        fix = "make it writable, or point ACE_RESULTS_DIR at a folder you can write to (stored results are still read)"
    else:
        fix = "check the disk and the folder, or point ACE_RESULTS_DIR at another folder"
    return StoreError(f"cannot write into the results folder {folder} ({exc.strerror or exc}); {fix}.")


@contextlib.contextmanager
def _folder_lock(folder: Path, *, reading: bool = False) -> Iterator[None]:
    """The folder's manifest lock. A reader of a folder it cannot write (read-only, another user's)
    reads without it: no process of ours can be writing there."""
    held = None
    try:
        if not reading:
            folder.mkdir(parents=True, exist_ok=True)
        lock = _lock(folder / ".manifest.lock")
        lock.acquire()
        held = lock
    except OSError as exc:
        if not (reading and exc.errno in _NOT_WRITABLE):
            raise _cannot_write(folder, exc) from None
    try:
        if held is not None and not reading:
            _remove_orphans(folder)
        yield
    finally:
        if held is not None:
            held.release()


def _remove_orphans(folder: Path) -> None:
    """Delete the temporary files of writers that died before renaming them (``_replace`` names
    them ``.<name>.<pid>.<random>.tmp``); a live writer's are left alone. Never read, only removed."""
    for tmp in folder.glob(".*.tmp"):
        parts = tmp.name.split(".")
        pid = int(parts[-3]) if len(parts) >= 4 and parts[-3].isdigit() else None
        if pid is not None and pid != os.getpid() and not _alive(pid):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _read_manifest(folder: Path) -> dict[str, list[str]]:
    """``{name: accepted SHA-256s}``: the file's hash, and its previous one while it is being replaced.

    Every name is checked to be a plain file name of ``folder`` (:func:`corelib.untrusted.manifest_files`),
    so a manifest can never name a path outside its folder."""
    path = folder / MANIFEST
    if not path.exists():
        return {}
    try:
        return manifest_files(path.read_bytes(), path)
    except UntrustedError as err:
        problem = str(err).rstrip(".")
        changed = "changed outside the store" in problem
        fix = "" if changed else " (a results folder written without manifests converts with scripts/adopt_results.py)"
        what = problem if changed else f"{path} cannot be read ({problem})"
        raise StoreError(f"{what}; delete the folder {folder} to recompute it{fix}.") from None


def _write_manifest(folder: Path, files: dict[str, list[str]]) -> None:
    body = json.dumps({"files": files, "digest": manifest_digest(files)}, indent=1, sort_keys=True)
    _replace(folder / MANIFEST, body.encode())


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a private temporary file, flushed, then renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _store(path: Path, data: bytes) -> None:
    path = Path(path)
    digest = _sha256(data)
    try:
        _store_locked(path, data, digest)
    except StoreError:
        raise
    except OSError as exc:
        raise _cannot_write(path.parent, exc) from None


def _store_locked(path: Path, data: bytes, digest: str) -> None:
    with _folder_lock(path.parent):
        files = _read_manifest(path.parent)
        # Two phases, so that a process killed at any instant leaves a file its manifest accepts:
        # first accept the new content next to the old, then replace the file, then drop the old.
        files[path.name] = list(dict.fromkeys([digest, *files.get(path.name, [])]))
        _write_manifest(path.parent, files)
        _replace(path, data)
        files[path.name] = [digest]
        _write_manifest(path.parent, files)


def _fetch(path: Path) -> bytes:
    path = Path(path)
    if path.is_symlink():  # the store writes only regular files: a link was put there by hand
        raise StoreError(f"{path} is a symbolic link, which the store never writes or follows; {_FIX}.")
    if not path.exists():
        raise StoreError(f"{path} does not exist; the run that writes it has not finished (run it again).")
    with _folder_lock(path.parent, reading=True):
        files = _read_manifest(path.parent)
        if not path.exists():
            raise StoreError(f"{path} does not exist; the run that writes it has not finished (run it again).")
        data = path.read_bytes()
    if path.name not in files and not (path.parent / MANIFEST).exists():
        raise StoreError(f"{path.parent / MANIFEST} is missing, so {path} cannot be verified; {_FIX}.")
    if path.name not in files:
        raise StoreError(f"{path} is not recorded in {path.parent / MANIFEST} (written outside the store); {_FIX}.")
    if _sha256(data) not in files[path.name]:
        raise StoreError(f"{path} is damaged or was edited (SHA-256 mismatch with its manifest); {_FIX}.")
    return data


def copy_file(src: Path | str, dst: Path | str) -> None:
    """Copy a stored file into another store folder: read verified against its manifest (under
    that folder's lock, so a writer cannot swap it mid-read), written atomically and recorded in
    the destination's manifest (other files there are left as they are)."""
    _store(Path(dst), _fetch(Path(src)))


def save_bytes(path: Path | str, data: bytes) -> None:
    """Store ``data`` verbatim at ``path`` (atomically, recorded in the folder's manifest): a file
    read elsewhere and checked against its own manifest, e.g. by :mod:`corelib.untrusted`."""
    _store(Path(path), bytes(data))


def save_json(path: Path | str, obj: Any, *, compact: bool = False) -> None:
    """Store ``obj`` as JSON at ``path`` (atomically, recorded in the folder's manifest);
    ``compact``: without indentation, for large files."""
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    _store(Path(path), json.dumps(obj, sort_keys=True, default=_jsonable, **layout).encode())


def load_json(path: Path | str) -> Any:
    """Read a JSON file written by :func:`save_json`, after checking it against the manifest."""
    data = _fetch(Path(path))
    try:
        return json.loads(data)
    except ValueError as err:
        raise StoreError(f"{path} is not valid JSON ({err}); {_FIX}.") from err


def save_tensors(path: Path | str, tensors: dict[str, torch.Tensor]) -> None:
    """Store named tensors at ``path`` in the safetensors format (no pickled objects)."""
    from safetensors.torch import save as _st_save

    flat = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    _store(Path(path), _st_save(flat))


def load_tensors(path: Path | str, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Read tensors written by :func:`save_tensors`, after checking them against the manifest."""
    from safetensors.torch import load as _st_load

    data = _fetch(Path(path))
    try:
        tensors = _st_load(data)
    except Exception as err:  # noqa: BLE001 - any parse failure means the file is unusable
        raise StoreError(f"{path} is not a readable safetensors file ({err}); {_FIX}.") from err
    return {k: v.to(device) for k, v in tensors.items()}


def remove(path: Path | str) -> None:
    """Delete a stored file and its manifest entry (nothing happens if it is absent)."""
    path = Path(path)
    if not path.parent.exists():
        return
    with _folder_lock(path.parent):
        path.unlink(missing_ok=True)  # first: a kill before the entry goes leaves no unrecorded file
        files = _read_manifest(path.parent)
        if files.pop(path.name, None) is not None:
            _write_manifest(path.parent, files)


def stored_files(folder: Path | str) -> list[str]:
    """Names of the files recorded in ``folder``'s manifest."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    with _folder_lock(folder, reading=True):
        return sorted(_read_manifest(folder))


def json_files(folder: Path | str) -> list[Path]:
    """The JSON files of ``folder`` (not its manifest), sorted; an empty list if it does not exist.

    Files the store did not record are listed too, so that reading them refuses them rather than
    skipping them silently.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    names = {n for n in stored_files(folder) if (folder / n).exists()} | {p.name for p in folder.glob("*.json")}
    return [folder / n for n in sorted(names) if n.endswith(".json") and n != MANIFEST]


def run_dir(kind: str, params: dict, root: Path | str | None = None) -> Path:
    """The folder of the run ``kind`` with ``params``; created with its ``params.json`` if new."""
    folder = Path(root or results_root()) / kind / params_key(params)
    stored = folder / "params.json"
    canonical = json.loads(_canonical(params))
    if stored.exists():  # written once, whole: no lock, so a process training this run does not block us
        if load_json(stored) != canonical:
            raise StoreError(f"{stored} holds different parameters than requested; delete {folder}.")
        return folder
    with run_lock(folder, f"creating {kind} run"):
        if stored.exists():
            if load_json(stored) != canonical:
                raise StoreError(f"{stored} holds different parameters than requested; delete {folder}.")
        else:
            save_json(stored, canonical)
    return folder


def compute_once(path: Path | str, compute: Callable[[], Any], what: str = "") -> Any:
    """The JSON stored at ``path``, computed by ``compute()`` and saved first if missing.

    Holds the folder's run lock while computing, so a second process asking for the same file
    waits and reuses it instead of computing it again.
    """
    path = Path(path)
    if not path.exists():
        with run_lock(path.parent, what or f"computing {path.name}"):
            if not path.exists():
                save_json(path, compute())
    return load_json(path)


def _acquired_at_once(lock) -> bool:
    """Acquire ``lock`` if nobody holds it; whether that happened (never waits)."""
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True


def run_busy(folder: Path | str) -> bool:
    """Whether another process (or thread) holds ``folder``'s run lock at this moment: a driver
    with several conditions to run can move on to one nobody is computing."""
    path = Path(folder) / ".run.lock"
    if not path.exists():
        return False
    lock = _lock(path)
    if not _acquired_at_once(lock):
        return True
    lock.release()
    return False


@contextlib.contextmanager
def claimed(folder: Path | str) -> Iterator[bool]:
    """Try, without waiting, to hold ``folder``'s driver lock for the block: yields True if the
    caller now holds it (the lock is re-entrant within a thread), False if another process or
    thread does. Drivers that share a list of jobs take only the jobs nobody holds (a killed
    driver's lock is released by the OS)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _lock(folder / ".driver.lock")
    if not _acquired_at_once(lock):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextlib.contextmanager
def run_lock(folder: Path | str, what: str = "this run") -> Iterator[None]:
    """Hold ``folder``'s run lock: a second process on the same folder waits, then reuses the work.

    The lock is an OS file lock, so a killed process releases it.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = _lock(folder / ".run.lock")
        free = _acquired_at_once(lock)
    except OSError as exc:
        raise _cannot_write(folder, exc) from None
    if not free:
        print(f"waiting for another process ({what} in {folder}) ...", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
