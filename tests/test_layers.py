"""The layers point one way (README, "Design"): the general layers know no task, experiment, claim
or plot; experiments draw no plots; corelib knows nothing of acebook; no import cycle; no module
imports another's private names. Read from the source with ``ast``; imports under
``if TYPE_CHECKING:`` are annotations, not dependencies."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECIFIC = ("corelib.tasks", "corelib.experiments", "corelib.claims", "corelib.plots", "corelib.exercises")


def layer_table(text: str) -> dict[int, list[str]]:
    """CONTRIBUTING's map of the layers: layer number -> the module names its row lists in backticks
    (paths and patterns such as ``corelib/tasks/`` or ``<chapter>.py`` left out)."""
    rows = re.findall(r"^\| (\d)\. [^|]+\| ([^|]+) \|", text, flags=re.MULTILINE)
    return {int(n): [m for m in re.findall(r"`([^`]+)`", cell) if re.fullmatch(r"\w+", m)] for n, cell in rows}


LAYERS = layer_table((ROOT / "CONTRIBUTING.md").read_text())
GENERAL = tuple(LAYERS[1])


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = {**_modules("corelib"), **_modules("acebook")}


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(n) for child in node.body for n in ast.walk(child)}
    return ids


def imports(name: str, *, annotations: bool = False) -> list[tuple[str, str]]:
    """(imported module, imported name or "") of module ``name``, at run time (``annotations``:
    those under ``if TYPE_CHECKING:`` too)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    skip = set() if annotations else _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            for a in node.names:
                full = f"{module}.{a.name}"
                out.append((full, "") if full in MODULES else (module, a.name))
    return [(m, n) for m, n in out if m.split(".")[0] in ("corelib", "acebook")]


def _edges(names=MODULES, *, annotations: bool = False) -> dict[str, set[str]]:
    return {name: {m for m, _ in imports(name, annotations=annotations) if m in names and m != name} for name in names}


def test_the_general_layers_import_no_task_experiment_claim_or_plot():
    found = {
        (f"corelib.{g}", m)
        for g in GENERAL
        for m, _ in imports(f"corelib.{g}")
        if any(m == s or m.startswith(s + ".") for s in SPECIFIC)
    }
    assert not found, f"general layers import specific ones: {sorted(found)}"


def test_experiments_report_numbers_and_never_judge_a_claim():
    """An experiment reads the claims registry for the paper's values and settings; holding a
    result to a claim's tolerance (``Claim.holds``) is the business of the figures, the claims page
    and the chapters."""
    for name, path in MODULES.items():
        if name.startswith("corelib.experiments"):
            calls = [
                node.lineno
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Attribute) and node.attr == "holds"
            ]
            assert not calls, f"{name} judges a claim at lines {calls}"


def test_experiments_draw_no_plots_and_corelib_knows_no_acebook():
    for name in MODULES:
        targets = {m for m, _ in imports(name)}
        if name.startswith("corelib.experiments"):
            assert not {m for m in targets if m.startswith("corelib.plots")}, name
        if name.startswith("corelib"):
            assert not {m for m in targets if m.startswith("acebook")}, name


def test_no_module_imports_another_modules_private_names():
    private = [
        (name, m, n)
        for name in MODULES
        for m, n in imports(name)
        if n.startswith("_") and not n.startswith("__") and m != name
    ]
    assert not private, private


def private_attributes(name: str) -> list[str]:
    """``module._name`` read in module ``name`` where ``module`` is another corelib or acebook
    module it imported (``from corelib.x import y`` or ``import corelib.x.y as y``)."""
    tree = ast.parse(MODULES[name].read_text())
    local = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                local[alias.asname or alias.name.split(".")[-1]] = alias.name
    modules = {k for k, full in local.items() if any(m.endswith(f".{full}") or m == full for m in MODULES)}
    return [
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in modules
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]


def test_no_module_reads_another_modules_private_names():
    found = {name: private_attributes(name) for name in MODULES}
    assert not {k: v for k, v in found.items() if v}, "make these public (documented) or keep them inside their module"


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph ``edges`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*path, nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_there_is_no_import_cycle():
    found = cycle(_edges())
    assert found is None, f"import cycle: {' -> '.join(found)}"


def test_the_general_layers_need_one_another_one_way_even_in_annotations():
    """Among the general layers no two modules know each other, not even for a type annotation:
    ``interventions`` knows ``Core``, and ``ace`` builds its hooks on ``hooks``, not on the
    interventions."""
    general = {f"corelib.{g}": MODULES[f"corelib.{g}"] for g in GENERAL}
    found = cycle(_edges(general, annotations=True))
    assert found is None, f"import cycle among the general layers: {' -> '.join(found)}"
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the finder finds one


def _tree_stems(folder: str) -> set[str]:
    return {p.stem for p in (ROOT / folder).glob("*.py") if p.stem != "__init__"}


def test_contributing_maps_the_layers_of_the_tree():
    """The table of CONTRIBUTING.md names every module of the general layers, the tasks, the
    shared experiments and the book tooling, and no module that is not there."""
    assert set(LAYERS) == set(range(1, 8)), "CONTRIBUTING.md's table has lost a layer's row"
    assert set(LAYERS[1]) == _tree_stems("corelib") - {"claims"}, "layer 1 of CONTRIBUTING.md and corelib/ differ"
    assert set(LAYERS[2]) == _tree_stems("corelib/tasks"), "layer 2 of CONTRIBUTING.md and corelib/tasks/ differ"
    assert set(LAYERS[4]) == SHARED_EXPERIMENTS, "layer 4's shared experiments and SHARED_EXPERIMENTS differ"
    assert set(LAYERS[6]) == _tree_stems("acebook"), "layer 6 of CONTRIBUTING.md and acebook/ differ"
    assert len(sum(LAYERS.values(), [])) == len(set(sum(LAYERS.values(), []))), "a module is listed twice"


# Experiment modules that compute no chapter of their own: what several chapters share.
SHARED_EXPERIMENTS = {"modular_runs", "modular_records", "paper_scale", "paper_scale_records"}


def _stems(folder: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / "corelib" / folder).glob("*.py") if p.stem != "__init__")


def test_modules_are_named_for_their_chapter_or_concept():
    """experiments/<chapter>.py computes a chapter (a part of it that is a concept of its own:
    <chapter>_<part>.py), plots/<chapter>_figures.py draws it, and no module name repeats across
    tasks/, experiments/ and plots/."""
    chapters = {p.stem for p in (ROOT / "notebooks").glob("*.py")}
    experiments = set(_stems("experiments"))
    parts = {s for s in experiments if any(s.startswith(f"{c}_") for c in chapters)}
    assert experiments - chapters - parts == SHARED_EXPERIMENTS
    figures = {s.removesuffix("_figures") for s in _stems("plots") if s != "style"}
    assert all(s.endswith("_figures") for s in _stems("plots") if s != "style")
    assert figures <= experiments
    names = [*_stems("tasks"), *experiments, *_stems("plots")]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)


def test_the_reader_of_imports_sees_them_as_python_does():
    """Relative imports resolve to their modules, imports inside functions count, those under
    TYPE_CHECKING do not, and a name imported from a module is kept with it."""
    assert all(m != "corelib.experiments.markov_chain" for m, _ in imports("corelib.plots.markov_chain_figures"))
    assert ("corelib.experiments.markov_chain", "MarkovSummary") in imports(
        "corelib.plots.markov_chain_figures", annotations=True
    )  # under TYPE_CHECKING only
    assert ("corelib.results", "StoreError") in imports("corelib.ace")  # inside Core.load
    assert ("corelib.hooks", "intervention_hook") in imports("corelib.ace")
    assert all(m != "corelib.interventions" for m, _ in imports("corelib.ace", annotations=True))
    assert ("corelib.models", "resid_hook") in imports("corelib.steering")
    assert ("corelib.results", "fresh_results_root") in imports("corelib.experiments.inflation_clock")
