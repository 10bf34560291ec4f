"""Files from elsewhere are untrusted: a pack carried between machines, a ``-p`` value or ``-f``
file, a saved core. One table per source; every row is one hostile input, refused with a message
that names the problem and the fix, before anything is written anywhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from acebook import paper_runs, runner
from corelib import untrusted
from corelib.ace import Core, extract, extract_from_model
from corelib.models import Transformer, TransformerConfig
from corelib.results import StoreError, copy_file, load_json, save_json, save_tensors

KEY = "0123456789abcdef"  # a run folder's name, as corelib.results.params_key makes them
ARM = Path("modular") / KEY / "wd"


def _tree(root: Path) -> dict[str, object]:
    """Everything under ``root``, links and fifos included but never followed or opened: what
    "nothing was written" compares."""
    out: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                out[rel] = "folder"
            elif stat.S_ISREG(mode):
                out[rel] = path.read_bytes()
            else:
                out[rel] = "special"
    return out


# --------------------------------------------------------------------------- packs (paper_runs unpack)


def _pack(src: Path) -> Path:
    """A valid pack of one core-inflation arm, written with the store as `pack` writes it."""
    arm = src / ARM
    save_json(src / "modular" / KEY / "params.json", {"p": 113})
    save_json(arm / "run.json", {"seeds": [0, 1]})
    save_json(arm / "state_000002.json", {"epoch": 2, "history": {}})
    save_tensors(arm / "snapshots" / "epoch_000002.safetensors", {"w": torch.ones(2)})
    save_json(arm / "progress.json", {"epoch": 2, "state": "state_000002", "snapshots": [2]})
    return src


def _files(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())["files"]


def _forge(folder: Path, files: object) -> None:
    """Rewrite a manifest as a hostile packer would: any entries, with the digest that matches them."""
    body = {"files": files, "digest": untrusted.manifest_digest(files)}
    (folder / "manifest.json").write_text(json.dumps(body))


def _list(folder: Path, name: str, data: bytes = b'{"x": 1}') -> None:
    files = _files(folder)
    files[name] = [hashlib.sha256(data).hexdigest()]
    _forge(folder, files)


def _escape(src: Path, home: Path) -> None:
    # Enough ../ to leave the results folder from the arm's folder; the file is there to be copied.
    (src.parent / "outside.json").write_bytes(b'{"x": 1}')
    _list(src / ARM, "../../../../outside.json")


def _link_file(src: Path, home: Path) -> None:
    """run.json moved outside and linked back: the same bytes, so only the link gives it away."""
    (home / "secret.json").write_bytes((src / ARM / "run.json").read_bytes())
    (src / ARM / "run.json").unlink()
    (src / ARM / "run.json").symlink_to(home / "secret.json")


def _link_folder(src: Path, home: Path) -> None:
    (src / ARM / "snapshots").rename(home / "snapshots")
    (src / ARM / "snapshots").symlink_to(home / "snapshots", target_is_directory=True)


def _link_lock(src: Path, home: Path) -> None:
    # The store's lock files are opened with O_TRUNC: a linked one would empty its target.
    (home / "precious.txt").write_text("precious")
    (src / ARM / ".manifest.lock").unlink(missing_ok=True)
    (src / ARM / ".manifest.lock").symlink_to(home / "precious.txt")


def _edit(src: Path, home: Path) -> None:
    path = src / ARM / "run.json"
    path.write_bytes(path.read_bytes().replace(b"0", b"7"))


def _progress(**changes) -> object:
    return lambda src, home: save_json(
        src / ARM / "progress.json", {"epoch": 2, "state": "state_000002", "snapshots": [2], **changes}
    )


PACK_CASES: list[tuple[str, object, str]] = [
    ("../ escapes the results folder", _escape, r"'\.\./\.\./\.\./\.\./outside\.json' is not a plain file name"),
    ("an absolute path", lambda s, h: _list(s / ARM, str(h / "abs.json")), "is not a plain file name"),
    ("a NUL in a name", lambda s, h: _list(s / ARM, "run.json\x00.txt"), "is not a plain file name"),
    ("a Windows path", lambda s, h: _list(s / ARM, "..\\..\\outside.json"), "is not a plain file name"),
    ("a hidden name (a lock)", lambda s, h: _list(s / ARM, ".manifest.lock"), "is not a plain file name"),
    ("the manifest lists itself", lambda s, h: _list(s / ARM, "manifest.json"), "lists itself"),
    ("a packed file is a link", _link_file, r"run\.json is a symbolic link"),
    ("a folder on the way is a link", _link_folder, r"snapshots is a symbolic link"),
    ("a lock file is a link", _link_lock, r"\.manifest\.lock is a symbolic link"),
    ("a fifo", lambda s, h: os.mkfifo(s / ARM / "pipe"), "neither a regular file nor a folder"),
    (
        "another experiment's folder",
        lambda s, h: save_json(s / "sweeps" / KEY / "params.json", {}),
        "sweeps/ belongs to another experiment",
    ),
    (
        "a folder that is not a run's",
        lambda s, h: save_json(s / "modular" / "notarun" / "params.json", {}),
        "'notarun' is not the folder of a run",
    ),
    ("a loose file", lambda s, h: (s / "notes.json").write_text("{}"), "never loose files"),
    ("an epoch in words", _progress(epoch="eight"), "'epoch' must be a whole number >= 0, got 'eight'"),
    ("a negative epoch", _progress(epoch=-3), "'epoch' must be a whole number >= 0"),
    ("snapshots not epochs", _progress(snapshots="all"), "'snapshots' must be a list of epochs"),
    ("a state outside its folder", _progress(state="../../x"), "is not a plain file name"),
    ("a state the manifest lacks", _progress(state="state_000009"), "manifest does not list"),
    ("files as a list", lambda s, h: _forge(s / ARM, sorted(_files(s / ARM))), "'files' must be a mapping"),
    ("a hash that is not one", lambda s, h: _forge(s / ARM, {"run.json": ["abc"]}), "list of SHA-256 digests"),
    ("an edited file", _edit, r"run\.json is damaged or was edited"),
    ("a listed file missing", lambda s, h: _list(s / ARM, "extra.json"), "'extra.json', which is not a file"),
    (
        "a manifest edited by hand",
        lambda s, h: (s / ARM / "manifest.json").write_text(json.dumps({"files": {}, "digest": "0" * 64})),
        "changed outside the store",
    ),
    (
        "duplicate keys in a manifest",
        lambda s, h: (s / ARM / "manifest.json").write_text('{"files": {}, "files": {}, "digest": ""}'),
        "the key 'files' appears twice",
    ),
]


@pytest.fixture
def carried(tmp_path, monkeypatch):
    """(pack, home): a valid pack in in_progress/, and the folder holding a results root with a
    stored file in it (``ACE_RESULTS_DIR``)."""
    home = tmp_path / "home"
    save_json(home / "results" / "other" / "params.json", {"kept": True})
    monkeypatch.setenv("ACE_RESULTS_DIR", str(home / "results"))
    monkeypatch.setattr(paper_runs, "IN_PROGRESS", tmp_path / "in_progress")
    return _pack(tmp_path / "in_progress" / "core_inflation"), home


@pytest.mark.parametrize(("case", "hostile", "problem"), PACK_CASES, ids=[c[0] for c in PACK_CASES])
def test_a_hostile_pack_is_refused_whole_before_anything_is_written(carried, tmp_path, case, hostile, problem):
    src, home = carried
    hostile(src, home)
    before = _tree(tmp_path)
    with pytest.raises(SystemExit) as info:
        paper_runs.main(["unpack", "core_inflation"])
    message = str(info.value.code)
    assert re.search(problem, message), message
    assert "refused the pack" in message and "nothing was copied" in message  # the problem, and
    assert "pack the run again where it was run" in message and f"delete {src}" in message  # the fix
    assert _tree(tmp_path) == before  # nothing written: not in the results, not beside them, not in the pack


def test_a_valid_pack_unpacks_only_the_files_its_manifests_list(carried):
    src, home = carried
    (src / ARM / "stray.json").write_text('{"not": "listed"}')  # on disk, not in the manifest
    assert paper_runs.main(["unpack", "core_inflation"]) == 0
    results = home / "results"
    assert load_json(results / ARM / "progress.json")["epoch"] == 2
    assert not (results / ARM / "stray.json").exists()
    for folder in (ARM, ARM / "snapshots", Path("modular") / KEY):
        copied = {p.name for p in (results / folder).iterdir() if p.is_file() and not p.name.startswith(".")}
        assert copied == set(_files(src / folder)) | {"manifest.json"}, folder
    assert load_json(results / "other" / "params.json") == {"kept": True}


def test_unpack_takes_only_the_folders_its_experiment_packs(carried):
    src, home = carried
    with pytest.raises(SystemExit, match="grokking_sweeps packs only folders under sweeps/"):
        paper_runs.unpack("grokking_sweeps", src)  # a core-inflation pack is not the sweeps'
    assert not (home / "results" / "modular").exists()


# --------------------------------------------------------------------------- paper_runs options


PAPER_RUNS_CASES: list[tuple[list[str], list[str]]] = [
    (["advance", "core_inflation", "--minutes", "nan"], ["--minutes must be a finite number", "got nan"]),
    (["advance", "core_inflation", "--minutes", "inf"], ["--minutes must be a finite number", "got inf"]),
    (["advance", "inflation_clock", "--minutes", "0"], ["--minutes must be a finite number of minutes above 0"]),
    (["advance", "grokking_sweeps", "--minutes", "-5"], ["--minutes must be a finite number of minutes above 0"]),
    (["advance", "core_inflation", "--chunk", "0"], ["--chunk and --pieces must be whole numbers >= 1"]),
    (["advance", "core_inflation", "--window"], ["--window is for inflation_clock only"]),
    (["pack", "grokking_sweeps", "--window"], ["--window is for inflation_clock only"]),
    (["advance", "grokking_sweeps", "--chunk", "3"], ["--chunk means nothing here", "leave it out"]),
    (["advance", "grokking_sweeps", "--together", "yes"], ["--together means nothing here", "leave it out"]),
    (["pack", "inflation_clock"], ["nothing to pack for inflation_clock", "advance it first"]),
]


@pytest.mark.parametrize(("argv", "fragments"), PAPER_RUNS_CASES, ids=lambda x: " ".join(x)[:50])
def test_paper_runs_refuses_options_that_mean_nothing_and_an_empty_pack(argv, fragments, tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(paper_runs, "IN_PROGRESS", tmp_path / "in_progress")
    with pytest.raises(SystemExit) as info:
        paper_runs.main([*argv, "--profile", "smoke"])
    assert info.value.code not in (0, None)
    for fragment in fragments:
        assert fragment in str(info.value.code)
    assert not (tmp_path / "in_progress").exists()  # no pack written
    if argv[0] == "advance":  # refused before any work
        assert not (tmp_path / "results").exists()


# --------------------------------------------------------------------------- -p values and -f files


def _file(content: bytes):
    def make(tmp: Path) -> str:
        (tmp / "params.yaml").write_bytes(content)
        return str(tmp / "params.yaml")

    return make


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe")
    return str(tmp / "pipe")


def _folder(tmp: Path) -> str:
    (tmp / "a_folder").mkdir()
    return str(tmp / "a_folder")


DEEP = b"[" * 200 + b"]" * 200
RUNNER_CASES: list[tuple[str, object, list[str]]] = [
    ("-p alias", ["-p", "seeds", "[&a [0, 1], *a]"], ["-p seeds", "anchors and aliases", "write the value out"]),
    ("-p alias alone", ["-p", "seeds", "*a"], ["-p seeds", "anchors and aliases (*a)"]),
    ("-p deep", ["-p", "seeds", DEEP.decode()], ["-p seeds", "nested more than", "flatten the value"]),
    ("-p duplicate key", ["-p", "lr", "{a: 1, a: 2}"], ["-p lr", "the key 'a' appears twice; keep one"]),
    ("-f folder", _folder, ["is a folder, not a regular file", "give the path of a file"]),
    ("-f missing", lambda t: str(t / "nothing.yaml"), ["cannot open", "No such file", "check the path"]),
    ("-f binary", _file(b"epochs: 5\n\x00\x01\x02"), ["binary file, not text", "give a text file"]),
    ("-f latin-1", _file("label: café\n".encode("latin-1")), ["is not UTF-8 text (byte 0xe9", "save it as UTF-8"]),
    ("-f deep", _file(b"seeds: " + DEEP), ["nested more than", "flatten the value"]),
    ("-f duplicate", _file(b"epochs: 1\nepochs: 2\n"), ["the key 'epochs' appears twice; keep one of them"]),
    ("-f alias", _file(b"a: &x [0, 1]\nseeds: *x\n"), ["anchors and aliases (&x)", "write the value out"]),
    (
        "-f too big",
        _file(b"# " + b"x" * runner.MAX_PARAMETERS_FILE + b"\nepochs: 5\n"),
        [f"is larger than {runner.MAX_PARAMETERS_FILE} bytes", "is it the right file?"],
    ),
]


@pytest.mark.parametrize(("case", "given", "fragments"), RUNNER_CASES, ids=[c[0] for c in RUNNER_CASES])
def test_the_command_line_refuses_hostile_yaml_without_reading_it_all(
    case, given, fragments, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))

    def no_work(*args, **kwargs):
        raise AssertionError("a chapter was executed")

    monkeypatch.setattr(runner, "_run_jobs", no_work)
    options = given if isinstance(given, list) else ["-f", given(tmp_path)]
    before = _tree(tmp_path)
    assert runner.main(["run", "markov_chain", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    assert _tree(tmp_path) == before and not (tmp_path / "results").exists()


# Read whole, /dev/zero fills the memory and a fifo without a writer blocks forever: these rows run
# in a child process whose address space is capped and whose time is limited, so that a regression
# fails the test rather than the machine.
ENDLESS_CASES: list[tuple[str, object, list[str]]] = [
    ("-f /dev/zero", lambda t: "/dev/zero", ["/dev/zero is a device or special file", "give the path of a file"]),
    ("-f fifo", _fifo, ["is a fifo, not a regular file", "give the path of a file"]),
]
_CAPPED = """
import resource, sys
from pathlib import Path
from acebook import runner
used = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
cap = used + (1 << 30) if hard == resource.RLIM_INFINITY else min(used + (1 << 30), hard)
resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
runner._run_jobs = None  # a chapter run would fail here: the refusal must come first
sys.exit(runner.main(sys.argv[1:]))
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux's /proc and /dev/zero")
@pytest.mark.parametrize(("case", "given", "fragments"), ENDLESS_CASES, ids=[c[0] for c in ENDLESS_CASES])
def test_a_parameters_file_that_never_ends_is_refused_without_reading_it(case, given, fragments, tmp_path):
    path = given(tmp_path)
    env = {**os.environ, "ACE_RESULTS_DIR": str(tmp_path / "results")}
    cmd = [sys.executable, "-c", _CAPPED, "run", "markov_chain", "-f", path]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_values_that_were_yaml_before_still_parse():
    assert runner.parse_value("[1e-4, 2e-4]") == [1e-4, 2e-4]
    assert runner.parse_value("a&b") == "a&b"  # '&' inside a word is text, not an anchor
    assert runner.parse_value("[0, 1") == "[0, 1"  # not YAML: left for the type check to name
    assert runner.parse_value("{a: [1, [2, 3]]}") == {"a": [1, [2, 3]]}


# --------------------------------------------------------------------------- saved cores


def _core(seed: int = 0, d: int = 6, rank: int = 3) -> Core:
    rng = np.random.default_rng(seed)
    c = extract(rng.normal(size=(200, d)) @ rng.normal(size=(d, d)), rng.normal(size=(200, 2, d)), rank=rank)
    return Core(c.basis, c.singular_values, c.mean, {"model": "test", "rank": rank})


def _arrays(**changes) -> dict[str, torch.Tensor]:
    core = _core()
    arrays = {"basis": core.basis, "singular_values": core.singular_values, "mean": core.mean, **changes}
    return {k: torch.as_tensor(np.ascontiguousarray(v)) for k, v in arrays.items()}


def _saved_with(**changes):
    """A saved core whose arrays are replaced, through the store, by bad ones: the manifest accepts them."""

    def make(tmp: Path) -> Path:
        folder = _core().save(tmp / "core")
        save_tensors(folder / "core.safetensors", _arrays(**changes))
        return folder

    return make


def _old_format(**changes):
    """A core saved before core.json described its arrays, with bad arrays."""

    def make(tmp: Path) -> Path:
        folder = _saved_with(**changes)(tmp)
        meta = load_json(folder / "core.json")
        save_json(folder / "core.json", {"format": meta["format"], "metadata": meta["metadata"]})
        return folder

    return make


def _linked_arrays(tmp: Path) -> Path:
    folder = _core().save(tmp / "core")
    (folder / "core.safetensors").rename(tmp / "elsewhere.safetensors")
    (folder / "core.safetensors").symlink_to(tmp / "elsewhere.safetensors")
    return folder


def _another_cores_arrays(tmp: Path) -> Path:
    folder = _core().save(tmp / "core")
    copy_file(_core(seed=1).save(tmp / "other") / "core.safetensors", folder / "core.safetensors")
    return folder


def _narrower(tmp: Path) -> Path:
    folder = _core().save(tmp / "core")
    copy_file(_core().truncate(2).save(tmp / "narrow") / "core.safetensors", folder / "core.safetensors")
    return folder


_BASIS = _core().basis
_SV = _core().singular_values
CORE_CASES: list[tuple[str, object, str]] = [
    ("a linked core.safetensors", _linked_arrays, r"core\.safetensors is a symbolic link"),
    ("a NaN basis", _saved_with(basis=np.where(np.eye(6, 3) > 0, np.nan, _BASIS)), "basis hold NaN/Inf"),
    ("an infinite mean", _saved_with(mean=np.full(6, np.inf)), "mean hold NaN/Inf"),
    ("a basis not orthonormal", _saved_with(basis=2 * _BASIS), "the basis is not orthonormal"),
    ("negative singular values", _saved_with(singular_values=-_SV), "must be non-negative and sorted"),
    ("unsorted singular values", _saved_with(singular_values=_SV[::-1].copy()), "sorted in descending order"),
    ("too few singular values", _saved_with(singular_values=_SV[:2]), r"2 singular values for a basis \(6, 3\)"),
    ("integer arrays", _saved_with(mean=np.zeros(6, dtype=np.int64)), "not a core's float arrays"),
    ("another core's arrays", _another_cores_arrays, "they belong to another core"),
    ("arrays of another shape", _narrower, "core.json describes"),
    ("old format, NaN", _old_format(singular_values=np.full(6, np.nan)), "singular_values hold NaN/Inf"),
    ("old format, not orthonormal", _old_format(basis=_BASIS + 0.01), "the basis is not orthonormal"),
    ("old format, rank not the metadata's", _old_format(basis=_BASIS[:, :2]), "the metadata gives rank 3"),
]


@pytest.mark.parametrize(("case", "make", "problem"), CORE_CASES, ids=[c[0] for c in CORE_CASES])
def test_a_hostile_saved_core_is_refused_and_nothing_is_written(case, make, problem, tmp_path):
    folder = make(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(StoreError) as info:
        Core.load(folder)
    message = str(info.value)
    assert re.search(problem, message), message
    assert f"refused the core in {folder}" in message and "Save it again with Core.save" in message
    assert _tree(tmp_path) == before  # Core.load writes nothing, not even a lock file


def test_saved_cores_old_and_new_load_back_without_following_a_linked_lock(tmp_path):
    core = _core()
    folder = core.save(tmp_path / "core")
    assert load_json(folder / "core.json")["arrays"]["shapes"]["basis"] == [6, 3]  # described at save
    (tmp_path / "precious.txt").write_text("precious")
    (folder / ".manifest.lock").unlink(missing_ok=True)
    (folder / ".manifest.lock").symlink_to(tmp_path / "precious.txt")  # the store opens locks with O_TRUNC
    back = Core.load(folder)
    np.testing.assert_array_equal(back.basis, core.basis)
    assert (tmp_path / "precious.txt").read_text() == "precious"
    old = _old_format()(tmp_path / "old")  # saved before cores described their arrays: still loads
    np.testing.assert_array_equal(Core.load(old).singular_values, core.singular_values)


# --------------------------------------------------------------------------- tensors given to the library


def test_a_core_refuses_integer_activations_instead_of_returning_zeros():
    core = _core()
    for op in ("keep", "remove", "flip", "coords"):
        with pytest.raises(TypeError, match=r"must be a floating-point tensor, got torch.int64; .*h.float\(\)"):
            getattr(core, op)(torch.ones(2, 6, dtype=torch.long))
    np.testing.assert_allclose(core.keep(torch.ones(2, 6)).numpy(), core.keep(np.ones((2, 6))), atol=1e-6)


def test_extract_from_model_refuses_a_target_with_a_position_axis():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=10, n_layers=1)).eval()
    x = torch.randint(0, 10, (12, 5), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"returned shape \(12, 5, 10\); it must return \(B, K\) or \(B,\)"):
        extract_from_model(model, "blocks.0.hook_resid_post", x, lambda out: out)
