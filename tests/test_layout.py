"""The package's layers, read from the source with ``ast`` (DESIGN.md §2).

Every import of a ``dspark_viz`` module counts, at module level or inside a function, so an import
moved into a function cannot hide a cycle. Lazy imports of heavy optional packages (gradio, altair,
transformers) are not the package's own and are not checked here.
"""
from __future__ import annotations

import ast
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


def _imports(mod: str) -> set[str]:
    """The dspark_viz modules that ``mod`` imports anywhere in its source."""
    path = MODULES[mod]
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "dspark_viz"}
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(mod, is_pkg, node)
            if base.split(".")[0] != "dspark_viz":
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in MODULES else base)
    return {m for m in out if m in MODULES and m != mod}


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
    assert {"dspark_viz.decode", "dspark_viz.scheduler", "dspark_viz.model.target",
            "dspark_viz.serving.profile", "dspark_viz.ui.widgets", "dspark_viz.cli"} <= set(MODULES)


def test_no_import_cycles():
    cycles = sorted(m for m in GRAPH if m in _reaches(m))
    assert not cycles, f"modules on an import cycle: {cycles}"


def _within(mod: str, *prefixes: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


FACES = ("dspark_viz.viz", "dspark_viz.ui", "dspark_viz.cli", "dspark_viz.bench")
CORE = ("dspark_viz.trace", "dspark_viz.sampling", "dspark_viz.decode", "dspark_viz.metrics", "dspark_viz.exact",
        "dspark_viz.scheduler", "dspark_viz.calibration", "dspark_viz.settings")


@pytest.mark.parametrize("mod", [m for m in MODULES if _within(m, *CORE)])
def test_core_imports_no_face(mod):
    bad = sorted(m for m in _reaches(mod) if _within(m, *FACES))
    assert not bad, f"{mod} reaches a face: {bad}"


@pytest.mark.parametrize("mod", ["dspark_viz.scheduler", "dspark_viz.calibration"])
def test_policies_import_no_drafter_or_model(mod):
    bad = sorted(m for m in _reaches(mod) if _within(m, "dspark_viz.drafters", "dspark_viz.model",
                                                     "dspark_viz.fast", "dspark_viz.train"))
    assert not bad, f"{mod} reaches {bad}"


@pytest.mark.parametrize("mod", [m for m in MODULES if _within(m, "dspark_viz.viz")])
def test_viz_reads_traces_not_models(mod):
    bad = sorted(m for m in _reaches(mod) if _within(m, "dspark_viz.model", "dspark_viz.fast", "dspark_viz.train",
                                                     "dspark_viz.drafters", "dspark_viz.decode",
                                                     "dspark_viz.ui", "dspark_viz.cli"))
    assert not bad, f"{mod} reaches {bad}"


@pytest.mark.parametrize("mod", [m for m in MODULES if not _within(m, "dspark_viz.ui", "dspark_viz.cli")])
def test_nothing_below_the_faces_imports_ui_or_cli(mod):
    bad = sorted(m for m in GRAPH[mod] if _within(m, "dspark_viz.ui", "dspark_viz.cli"))
    assert not bad, f"{mod} imports {bad}"


def test_serving_profile_is_a_leaf():
    assert GRAPH["dspark_viz.serving.profile"] <= {"dspark_viz.settings"}


def test_fast_path_imports_no_model_or_drafter():
    for mod in (m for m in MODULES if _within(m, "dspark_viz.fast")):
        bad = sorted(m for m in _reaches(mod) if _within(m, "dspark_viz.model", "dspark_viz.drafters"))
        assert not bad, f"{mod} reaches {bad}"


def test_modules_stay_small():
    """A module is a few screens; the ones over 400 lines say why in this table."""
    reasons = {}
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert set(big) <= set(reasons), f"modules over 400 lines: {big}"
