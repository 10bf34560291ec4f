"""One reader for files that come from elsewhere: a pack carried between machines, a saved core,
a parameters file. It refuses before anything is written, with a message naming the problem.

What it refuses: names that are not one plain path component (``..``, absolute paths, NUL,
backslashes, control characters); symbolic links, anywhere (it never follows one, so a packed
file or folder cannot point outside); anything that is not a regular file (a fifo, a device such
as ``/dev/zero``, a folder where a file is wanted); files over a size limit (it reads at most the
limit plus one byte); JSON with duplicate keys, NaN/Infinity or deep nesting; YAML with anchors
or aliases (one alias can expand to gigabytes), duplicate keys or deep nesting; text that is not
UTF-8. A folder of stored files is read against its ``manifest.json`` (the SHA-256 of each file,
see :mod:`corelib.results`) without taking its lock, since the lock file may itself be a link.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "UntrustedError",
    "MANIFEST",
    "MAX_DEPTH",
    "check_name",
    "read_bytes",
    "file_sha256",
    "read_text",
    "load_json",
    "load_yaml",
    "manifest_digest",
    "manifest_files",
    "Tree",
    "walk",
    "read_manifest",
    "read_stored",
]

MANIFEST = "manifest.json"
MAX_DEPTH = 32  # nesting of a JSON or YAML value: parameters and records need a handful
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


class UntrustedError(ValueError):
    """A file from elsewhere that is refused: its name, kind, size or content is not what it must be."""


def check_name(name: object, what: str) -> str:
    """``name`` if it is one plain, visible path component (a file or folder name inside its folder).

    Refused: non-strings, ``""``, ``.``, ``..``, names starting with ``.`` (the store's locks and
    temporary files, never recorded), ``/`` or ``\\`` (paths, and Windows paths), NUL and other
    control characters, and names over 255 bytes."""
    if not isinstance(name, str):
        raise UntrustedError(f"{what}: a name must be a string, got {type(name).__name__} {name!r}.")
    bad = (
        not name
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
        or len(name.encode("utf-8", "surrogatepass")) > 255
    )
    if bad:
        raise UntrustedError(
            f"{what}: {name!r} is not a plain file name (no '/', '\\', '..', leading '.', control characters)."
        )
    return name


def _open(path: Path, what: str, follow_symlinks: bool) -> int:
    """A descriptor of the regular file ``path``: never a link unless ``follow_symlinks``, never a
    fifo (opened without blocking, then refused), a device or a folder."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise UntrustedError(
                f"{what}: {path} is a symbolic link; links are never followed, so put the file itself there."
            ) from None
        raise UntrustedError(f"{what}: cannot open {path} ({exc.strerror}); check the path.") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a fifo" if stat.S_ISFIFO(mode) else "a device or special file"
        raise UntrustedError(f"{what}: {path} is {kind}, not a regular file; give the path of a file.")
    return fd


def _too_big(path: Path, what: str, limit: int) -> UntrustedError:
    return UntrustedError(f"{what}: {path} is larger than {limit} bytes, the most it may hold; is it the right file?")


def read_bytes(path: Path | str, *, limit: int, what: str, follow_symlinks: bool = False) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes (a larger file is refused
    after reading ``limit + 1`` bytes, so a file that grows or never ends costs no more)."""
    path = Path(path)
    fd = _open(path, what, follow_symlinks)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _too_big(path, what, limit)
    return data


def file_sha256(path: Path | str, *, limit: int, what: str) -> str:
    """SHA-256 of the regular file ``path`` (never a link), read in chunks; refused over ``limit`` bytes."""
    path = Path(path)
    digest, size = hashlib.sha256(), 0
    with os.fdopen(_open(path, what, False), "rb") as f:
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise _too_big(path, what, limit)
            digest.update(chunk)
    return digest.hexdigest()


def read_text(path: Path | str, *, limit: int, what: str, follow_symlinks: bool = False) -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`); binary or other encodings are refused."""
    data = read_bytes(path, limit=limit, what=what, follow_symlinks=follow_symlinks)
    if b"\0" in data:
        raise UntrustedError(f"{what}: {path} holds NUL bytes, so it is a binary file, not text; give a text file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UntrustedError(
            f"{what}: {path} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save it as UTF-8."
        ) from None


# --------------------------------------------------------------------------- JSON and YAML


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed value, refused beyond ``limit`` (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                raise UntrustedError(f"nested more than {limit} levels deep")
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise UntrustedError(f"the key {key!r} appears twice")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise UntrustedError(f"{name} is not a JSON number")


def load_json(data: bytes | str, what: str, *, max_depth: int = MAX_DEPTH, constants: bool = False) -> Any:
    """Strict JSON: no duplicate keys, at most ``max_depth`` levels of nesting, and no NaN/Infinity
    unless ``constants`` (Python's json writes them, e.g. in free-form metadata)."""
    try:
        refuse = {} if constants else {"parse_constant": _no_constant}
        value = json.loads(data, object_pairs_hook=_no_duplicates, **refuse)
        _depth(value, max_depth)
    except UntrustedError as exc:
        raise UntrustedError(f"{what} is refused: {exc}.") from None
    except RecursionError:
        raise UntrustedError(f"{what} is refused: nested too deeply to read.") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise UntrustedError(f"{what} is not valid JSON ({exc}).") from None
    return value


@functools.cache
def _strict_loader():
    """A YAML SafeLoader without anchors, aliases or duplicate keys, and with a nesting limit.

    Built on first use: corelib does not need PyYAML otherwise."""
    import yaml

    class Strict(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
                raise UntrustedError(
                    f"YAML anchors and aliases ({sign}{event.anchor}) are not accepted, since one alias can "
                    "expand to gigabytes; write the value out in full"
                )
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise UntrustedError(f"nested more than {MAX_DEPTH} levels deep; flatten the value")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class refuses it with its own message
                    continue
                if duplicate:
                    raise UntrustedError(f"the key {key!r} appears twice; keep one of them")
            return super().construct_mapping(node, deep=deep)

    return Strict


def load_yaml(text: str, what: str) -> Any:
    """YAML through a safe loader that refuses anchors and aliases, duplicate keys and nesting beyond
    :data:`MAX_DEPTH`, as :class:`UntrustedError` naming ``what``. A syntax error is left as
    ``yaml.YAMLError`` (callers report it, or take the text as a plain string)."""
    loader = _strict_loader()(text)
    try:
        return loader.get_single_data()
    except UntrustedError as exc:
        raise UntrustedError(f"{what}: {exc}.") from None
    except RecursionError:
        raise UntrustedError(f"{what}: nested too deeply to read; flatten the value.") from None
    finally:
        loader.dispose()


# --------------------------------------------------------------------------- stored folders


def manifest_digest(files: dict[str, list[str]]) -> str:
    """The digest a manifest keeps of its own ``files`` mapping (written by :mod:`corelib.results`)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def manifest_files(data: bytes, path: Path | str) -> dict[str, list[str]]:
    """The ``files`` mapping of the manifest ``data`` read from ``path``: ``{name: [SHA-256, ...]}``
    with every name a plain file name of its folder and every hash 64 hex digits, and the manifest's
    digest matching. Anything else is :class:`UntrustedError` naming what is wrong."""
    manifest = load_json(data, str(path))
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        got = type(manifest.get("files")).__name__ if isinstance(manifest, dict) else type(manifest).__name__
        raise UntrustedError(f"{path}: 'files' must be a mapping of file names to SHA-256 lists, got {got}.")
    files = manifest["files"]
    for name, hashes in files.items():
        check_name(name, str(path))
        if name == MANIFEST:
            raise UntrustedError(f"{path} lists itself as a file of its folder.")
        if (
            not isinstance(hashes, list)
            or not hashes
            or not all(isinstance(h, str) and _HEX64.fullmatch(h) for h in hashes)
        ):
            raise UntrustedError(f"{path}: the entry of {name!r} must be a list of SHA-256 digests, got {hashes!r}.")
    if manifest.get("digest") != manifest_digest(files):
        raise UntrustedError(f"{path} was changed outside the store (its digest does not match).")
    return files


@dataclass(frozen=True)
class Tree:
    """What :func:`walk` found under a folder: its sub-folders and regular files (relative paths,
    each component a plain name; hidden files, the store's locks, apart)."""

    folders: tuple[Path, ...]
    files: tuple[Path, ...]
    hidden: tuple[Path, ...]


def _entries(folder: Path, what: str) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            yield from sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise UntrustedError(f"{what}: cannot list {folder} ({exc.strerror}).") from None


def walk(root: Path | str, what: str, *, max_entries: int = 100_000) -> Tree:
    """Every folder and file under ``root``, without following any link: a symbolic link anywhere
    (``root`` included), a fifo, socket or device, or a name that is not plain is refused. Hidden
    regular files (``.name``: the store's lock files) are listed apart; they are never to be copied."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        raise UntrustedError(f"{what}: {root} is {'a symbolic link' if root.is_symlink() else 'not a folder'}.")
    folders, files, hidden, todo = [], [], [], [Path()]
    while todo:
        rel = todo.pop()
        for entry in _entries(root / rel, what):
            path = rel / entry.name
            if entry.is_symlink():
                raise UntrustedError(f"{what}: {root / path} is a symbolic link; links are never followed.")
            if entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                hidden.append(path)
                continue
            check_name(entry.name, f"{what}: {root / rel}")
            if entry.is_dir(follow_symlinks=False):
                folders.append(path)
                todo.append(path)
            elif entry.is_file(follow_symlinks=False):
                files.append(path)
            else:
                raise UntrustedError(
                    f"{what}: {root / path} is neither a regular file nor a folder (a fifo or device)."
                )
            if len(folders) + len(files) > max_entries:
                raise UntrustedError(f"{what}: {root} holds more than {max_entries} files and folders.")
    return Tree(tuple(sorted(folders)), tuple(sorted(files)), tuple(sorted(hidden)))


MAX_MANIFEST = 16 << 20  # a manifest of 100,000 files


def read_manifest(folder: Path | str, what: str) -> dict[str, list[str]]:
    """The checked ``files`` mapping of ``folder``'s manifest, read without its lock and never
    through a link (see :func:`manifest_files`)."""
    path = Path(folder) / MANIFEST
    return manifest_files(read_bytes(path, limit=MAX_MANIFEST, what=what), path)


def read_stored(path: Path | str, *, limit: int, what: str, files: dict[str, list[str]] | None = None) -> bytes:
    """The content of the stored file ``path``, checked against its folder's manifest (``files``,
    if already read): never through a link, at most ``limit`` bytes, its SHA-256 one the manifest
    accepts. Takes no lock and writes nothing."""
    path = Path(path)
    if files is None:
        files = read_manifest(path.parent, what)
    if path.name not in files:
        raise UntrustedError(f"{what}: {path} is not recorded in {path.parent / MANIFEST}.")
    data = read_bytes(path, limit=limit, what=what)
    if hashlib.sha256(data).hexdigest() not in files[path.name]:
        raise UntrustedError(f"{what}: {path} is damaged or was edited (SHA-256 mismatch with its manifest).")
    return data
