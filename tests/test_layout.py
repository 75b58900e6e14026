"""The package's layers, read from the source with ``ast`` (docs/architecture.md).

Every import of a ``dspark_viz`` module counts, at module level or inside a function, so an import
moved into a function cannot hide a cycle. Lazy imports of heavy optional packages (gradio, altair,
transformers) are not the package's own and are not checked here.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "dspark_viz"
ROOT = PKG.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imported_bases(mod: str) -> set[str]:
    """Every ``dspark_viz…`` module path that ``mod``'s source names in an import (before resolving names)."""
    path = MODULES[mod]
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "dspark_viz"}
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, is_pkg, node)
            if base.split(".")[0] == "dspark_viz":
                out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return out


def _imports(mod: str) -> set[str]:
    """The dspark_viz modules that ``mod`` imports anywhere in its source."""
    return {m for m in _imported_bases(mod) if m in MODULES and m != mod}


GRAPH = {m: _imports(m) for m in MODULES}


def _reaches(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for n in GRAPH[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def test_every_module_is_seen():
    assert {"dspark_viz.decode", "dspark_viz.scheduler", "dspark_viz.cost", "dspark_viz.protocol",
            "dspark_viz.model.target", "dspark_viz.ui.notebook.widgets", "dspark_viz.ui.app.live",
            "dspark_viz.cli"} <= set(MODULES)


def test_no_import_cycles():
    cycles = sorted(m for m in GRAPH if m in _reaches(m))
    assert not cycles, f"modules on an import cycle: {cycles}"


def test_the_package_imports_modules_by_their_homes():
    """Inside the package every import names a module that exists."""
    bad = {m: sorted(b for b in _imported_bases(m) if b not in MODULES) for m in MODULES}
    assert not {m: b for m, b in bad.items() if b}


def _within(mod: str, *prefixes: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


# The layers, bottom up (docs/architecture.md). The package root (dspark_viz/__init__.py) is the public API and
# imports from every layer.
P = "dspark_viz."
CORE = tuple(P + m for m in ("settings", "records", "trace", "sampling", "protocol", "cost", "scheduler",
                             "gate", "background", "calibration", "metrics", "exact", "round", "decode", "paper",
                             "registry", "memo", "threads", "markov_toy"))
MODEL = (P + "model", P + "fast")
DRAFTERS = (P + "drafters",)
DATA_IO = (P + "datasets",)
SERVING = (P + "serving",)
ABOVE_DRAFTERS = (P + "train", P + "evaluation")
FACES = (P + "viz", P + "ui", P + "cli")


def test_every_module_has_a_layer():
    layered = CORE + MODEL + DRAFTERS + DATA_IO + SERVING + ABOVE_DRAFTERS + FACES
    assert not sorted(m for m in MODULES if m != "dspark_viz" and not _within(m, *layered))


@pytest.mark.parametrize("mod", [m for m in MODULES if _within(m, *CORE, *MODEL, *DRAFTERS)])
def test_core_model_and_drafters_import_nothing_above_them(mod):
    """No arrow from the core, model/, fast/ or drafters/ into serving/, the data I/O, training, evaluation or
    a face."""
    bad = sorted(m for m in _reaches(mod) if _within(m, *DATA_IO, *SERVING, *ABOVE_DRAFTERS, *FACES))
    assert not bad, f"{mod} reaches {bad}"


@pytest.mark.parametrize("mod", [m for m in MODULES if _within(m, *CORE)])
def test_the_core_loads_no_drafter_and_no_kernel(mod):
    """The core reads a target only by duck typing (cost.profile_for reads its device, dtype and paths by name)."""
    bad = sorted(m for m in _reaches(mod) if _within(m, *DRAFTERS, P + "fast", P + "model"))
    assert not bad, f"{mod} reaches {bad}"


def test_importing_the_core_loads_only_the_core():
    """At run time too: the decode loop and the drafter protocol import no drafter, kernel or face."""
    code = ("import sys, dspark_viz.decode, dspark_viz.protocol; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('dspark_viz'))))")
    env = {k: v for k, v in os.environ.items()} | {"PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = run.stdout.split()
    assert "dspark_viz.decode" in loaded and "dspark_viz.protocol" in loaded
    assert all(_within(m, *CORE) or m == "dspark_viz" for m in loaded), loaded


@pytest.mark.parametrize("mod", [P + "scheduler", P + "gate", P + "calibration", P + "background", P + "cost"])
def test_policies_import_no_drafter_or_model(mod):
    bad = sorted(m for m in _reaches(mod) if _within(m, *DRAFTERS, *MODEL, P + "train"))
    assert not bad, f"{mod} reaches {bad}"


def test_the_cost_model_is_a_leaf():
    assert GRAPH[P + "cost"] <= {P + "settings", P + "records"}


@pytest.mark.parametrize("mod", [m for m in MODULES if _within(m, P + "viz")])
def test_viz_reads_traces_not_models(mod):
    bad = sorted(m for m in _reaches(mod) if _within(m, *MODEL, *DRAFTERS, P + "train", P + "decode",
                                                     P + "ui", P + "cli"))
    assert not bad, f"{mod} reaches {bad}"


@pytest.mark.parametrize("mod", [m for m in MODULES if m != "dspark_viz" and not _within(m, *FACES)])
def test_nothing_below_the_faces_imports_a_face(mod):
    bad = sorted(m for m in GRAPH[mod] if _within(m, *FACES))
    assert not bad, f"{mod} imports {bad}"


@pytest.mark.parametrize("toolkit, other", [("app", "notebook"), ("notebook", "app")])
def test_the_two_ui_toolkits_do_not_import_each_other(toolkit, other):
    for mod in (m for m in MODULES if _within(m, f"{P}ui.{toolkit}")):
        bad = sorted(m for m in _reaches(mod) if _within(m, f"{P}ui.{other}"))
        assert not bad, f"{mod} reaches {bad}"


def test_fast_path_imports_no_model_or_drafter():
    for mod in (m for m in MODULES if _within(m, P + "fast")):
        bad = sorted(m for m in _reaches(mod) if _within(m, P + "model", *DRAFTERS))
        assert not bad, f"{mod} reaches {bad}"


def test_only_the_fast_path_touches_the_kernels():
    """One door: the target and the drafters ask fast/ (its package) for their products; nothing outside fast/
    but the tools that report on the kernels (cli setup, machine_info) imports kernels, attention or lean."""
    inner = {P + "fast.kernels", P + "fast.attention", P + "fast.lean"}
    reporters = {P + "cli.setup", P + "evaluation.machine_info"}
    bad = sorted(m for m in MODULES if not _within(m, P + "fast") and m not in reporters and GRAPH[m] & inner)
    assert not bad, f"modules reaching into fast/ past its door: {bad}"


def test_no_compatibility_aliases():
    """One name per module: no finder for earlier module names, no module that only re-exports another."""
    assert not (PKG / "moved.py").exists()
    for old in ("trace_store", "synthetic", "evaluate", "machine", "prompts", "bench"):
        assert importlib.util.find_spec(f"dspark_viz.{old}") is None, old
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        only_imports = all(isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Assign)
                           and [getattr(t, "id", "") for t in n.targets] == ["__all__"]) for n in body)
        assert path.name == "__init__.py" or not only_imports or not body, f"{mod} only re-exports"


def test_pyproject_lists_every_package():
    """pyproject.toml lists the packages (assets/ is mapped into the package, so they cannot be found by
    setuptools' search); a new folder must be added there or a wheel would lack it."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    on_disk = {_module_name(p) for p in PKG.rglob("__init__.py")}
    assert set(cfg["packages"]) == on_disk | {"dspark_viz.assets"}
    assert cfg["package-dir"] == {"dspark_viz.assets": "assets"}


def test_modules_stay_small():
    """A module is a few screens; the ones over 400 lines say why in this table."""
    reasons = {}
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert set(big) <= set(reasons), f"modules over 400 lines: {big}"
