"""The README keeps its promises: the commands, flags, files, settings, tabs and notebooks it names exist, and its
Python example runs. Also the docs index (docs/README.md) lists every doc and data folder, and the user docs carry
no words from how the project was made.

Everything except the example reads text only (the CLI's parser, app.py's and scripts' sources), so it takes a
fraction of a second; the example decodes on the embedded model (``slow``).
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dspark_viz.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TEXT = README.read_text(encoding="utf-8")
MAX_WORDS = 1600                                       # "about 1,500 words"
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
GENERATED = (".venv",)                                 # made by `make`, not in a fresh checkout
PATH_TOKEN = re.compile(r"^[\w.+*\-]+(/[\w.+*\-]*)*/?$")
FILE_EXT = re.compile(r"\.(py|md|ipynb|toml|cfg|cpp|h)$")       # files named without a folder: checked too


# -- reading Markdown ------------------------------------------------------------------------------------------
def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [(m.group(1).strip().lower(), m.group(2))
            for m in re.finditer(r"^```([^\n]*)\n(.*?)^```", text, flags=re.M | re.S)]


def prose(text: str) -> str:
    return re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)


def inline_code(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", prose(text))


def links(text: str) -> list[str]:
    return [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", prose(text))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def shell_lines(text: str) -> list[str]:
    """Command lines of the shell blocks (continuations joined) and inline spans that are commands."""
    out = []
    for lang, body in code_blocks(text):
        if lang in SHELL_LANGS:
            out += [ln.strip().removeprefix("$ ") for ln in body.replace("\\\n", " ").splitlines() if ln.strip()]
    return out + [s for s in inline_code(text) if " " in s]


def commands(text: str, prog: str) -> list[list[str]]:
    """The arguments after ``prog`` (a name, or a path ending in it) on every command line that runs it."""
    found = []
    for line in shell_lines(text):
        try:
            toks = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, t in enumerate(toks):
            if t == prog or t.endswith("/" + prog):
                found.append(toks[i + 1:])
                break
    return found


# -- what really exists ----------------------------------------------------------------------------------------
def subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = build_parser()
    return next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices


def options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


def script_options(path: Path) -> set[str]:
    """The flags a script's argparse declares, read from its source (no import: app.py would load gradio)."""
    return set(re.findall(r"add_argument\(\s*[\"'](--[\w-]+)[\"']", path.read_text(encoding="utf-8"))) | {"--help"}


def flags(args: list[str]) -> list[str]:
    return [a.split("=")[0] for a in args if a.startswith("--")]


# -- the README -------------------------------------------------------------------------------------------------
def test_readme_subcommands_and_their_flags_exist():
    subs = commands(TEXT, "dspark-viz")
    assert len(subs) >= 8, "the README's command-line section is missing"
    choices = subparsers()
    for args in subs:
        assert args and args[0] in choices, f"`dspark-viz {' '.join(args)}`: no such subcommand"
        known = options(choices[args[0]])
        for f in flags(args[1:]):
            assert f in known, f"`dspark-viz {args[0]}` has no {f} (it has {', '.join(sorted(known))})"


def test_readme_scripts_make_targets_and_lone_flags_exist():
    every = set().union(*(options(p) for p in subparsers().values()))
    for line in shell_lines(TEXT):
        try:
            toks = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, t in enumerate(toks):
            if t.endswith(".py") and i > 0 and toks[i - 1].endswith("python"):       # python SCRIPT.py --flag …
                script = ROOT / t
                assert script.is_file(), f"`{line}`: {t} does not exist"
                known = script_options(script)
                every |= known
                for f in flags(toks[i + 1:]):
                    assert f in known, f"`{line}`: {t} has no {f}"
        if toks[:1] == ["make"]:
            targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
            assert set(toks[1:]) <= targets, f"`{line}`: the Makefile has targets {sorted(targets)}"
    lone = [s.split()[0] for s in inline_code(TEXT) if s.startswith("--")]
    assert lone, "no flags named in the README's text?"
    for f in lone:
        assert f.split("=")[0] in every, f"the README names {f}, which no command has"


def repo_paths(text: str, base: Path) -> list[tuple[str, Path]]:
    """Inline-code spans and links that look like repository paths, resolved against ``base`` (and the root)."""
    cands = [s for s in inline_code(text) if PATH_TOKEN.match(s) and ("/" in s or FILE_EXT.search(s))] + links(text)
    return [(c, base) for c in cands if not c.startswith(GENERATED) and c not in {".", ".."}]


def exists(name: str, base: Path) -> bool:
    for b in (base, ROOT):
        p = b / name.rstrip("/")
        if ("*" in name and list(p.parent.glob(p.name))) or p.exists():
            return True
    return False


def test_readme_paths_exist():
    named = repo_paths(TEXT, ROOT)
    assert any(n == "docs/app.png" for n, _ in named), "the README shows the app's screenshot, docs/app.png"
    missing = [n for n, b in named if not exists(n, b)]
    assert not missing, f"the README names files that are not in the repository: {missing}"


def test_readme_settings_table_matches_settings_module():
    from dspark_viz import settings

    documented = set(re.findall(r"``(DSPARK_\w+)``", settings.__doc__))
    table = set(re.findall(r"^\| `(DSPARK_\w+)` \|", TEXT, flags=re.M))
    assert documented and table == documented, (f"README only: {sorted(table - documented)}, "
                                                f"settings.py only: {sorted(documented - table)}")


def section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert m, f"the README has no '## {title}' section"
    return m.group(1)


def test_readme_names_the_apps_tabs():
    tabs = re.findall(r"gr\.Tab\(\"([^\"]+)\"", (ROOT / "app.py").read_text(encoding="utf-8"))
    listed = re.findall(r"^- \*\*([^*]+)\*\*", section(TEXT, "The app"), flags=re.M)
    assert tabs and listed == tabs


def test_readme_lists_every_notebook():
    have = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    listed = re.findall(r"^\| `(\d\d_\w+)` \|", section(TEXT, "The notebooks"), flags=re.M)
    assert have and listed == have


def words(text: str) -> list[str]:
    """The words of a text: whitespace-separated tokens with a letter or digit (a table's pipes and rules, an
    arrow or a dash are not words)."""
    return [w for w in text.split() if re.search(r"\w", w)]


def test_readme_length_and_speed_section():
    n = len(words(TEXT))
    assert n <= MAX_WORDS, f"{n} words: the README is for users, keep it short"
    assert re.search(r"^### Speed$", TEXT, flags=re.M)


def test_words_skip_table_rules_and_count_numbers():
    assert words("| a | 1.5 | → | — |\n|---|---|") == ["a", "1.5"]


PROCESS_WORDS = re.compile(r"\bsession\b|\bissue \d|\bround \d|\.\./shared", re.I)
PENDING: set[str] = set()


@pytest.mark.parametrize("doc", ["README.md"] + sorted(f"docs/{p.name}" for p in DOCS.glob("*.md")
                                                       if p.name not in PENDING))
def test_user_docs_speak_of_the_product(doc):
    hits = [ln.strip()[:100] for ln in (ROOT / doc).read_text(encoding="utf-8").splitlines()
            if PROCESS_WORDS.search(ln)]
    assert not hits, f"{doc}: words from how the project was made: {hits}"


# -- docs/README.md ---------------------------------------------------------------------------------------------
def test_docs_index_lists_every_entry_and_names_only_real_ones():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    names = [s for s in inline_code(index) if PATH_TOKEN.match(s) and re.search(r"[./]", s)] + links(index)
    named = [(s, DOCS) for s in names]
    missing = [n for n, b in named if not exists(n, b)]
    assert not missing, f"docs/README.md names what does not exist: {missing}"
    patterns = {n.rstrip("/") for n, _ in named}
    unlisted = [p.name for p in sorted(DOCS.iterdir())
                if p.name != "README.md" and not any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert not unlisted, f"docs/README.md does not list: {unlisted}"


# -- the Python example -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_readme_python_example_runs(tmp_path):
    from dspark_viz.model.target import find_embedded_gguf

    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    blocks = [body for lang, body in code_blocks(TEXT) if lang == "python"]
    assert len(blocks) == 1, "the README has one Python example"
    code = blocks[0]
    for api in ("import dspark_viz as dv", "dv.load_target(", "dv.load_drafter(\"dspark\"", "dv.speculative_generate(",
                "dv.HardwareAware()", "dv.metrics.tau("):
        assert api in code
    code, n = re.subn(r"max_new_tokens=\d+", "max_new_tokens=12", code)
    assert n == 1
    env = dict(os.environ, DSPARK_TUNE="0", GRADIO_ANALYTICS_ENABLED="False")
    env.setdefault("OMP_NUM_THREADS", "1")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    tau = re.search(r"tau = ([0-9.]+)", r.stdout)
    assert tau and 1.0 <= float(tau.group(1)) <= 8.0, r.stdout


def test_readme_notebook_minutes_are_the_stored_run_times():
    """The README's minutes per notebook are the run times tools/run_notebooks.py stored in each notebook (the
    same numbers as notebooks/README.md's table), not typed."""
    import json

    rows = re.findall(r"^\| `(\d\d_\w+)` \|.*\| ([^|]*) \|$", section(TEXT, "The notebooks"), flags=re.M)
    assert rows
    for stem, shown in rows:
        meta = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["metadata"]
        secs = meta.get("dspark_viz", {}).get("seconds")
        assert secs is not None and shown == f"{secs / 60:.1f}", (stem, shown, secs)
