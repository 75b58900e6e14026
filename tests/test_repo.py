"""Repository hygiene: the shipped assets stay light (docs/architecture.md: all of assets/ under 96 MB), the notebooks
are committed with their outputs."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_assets_under_96_mb():
    size = sum(p.stat().st_size for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert 0 < size < 96_000_000, f"assets/ holds {size / 1e6:.1f} MB"


def test_shipped_weights_are_safetensors():
    files = [p for p in (ROOT / "assets").rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in {".pt", ".pth", ".bin", ".pkl", ".ckpt"}]
    assert any(p.suffix == ".safetensors" for p in files)


def test_notebooks_are_committed_executed():
    """nbval compares stored outputs; a notebook saved without them would be checked against nothing."""
    import json

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{path.name}: run it before committing"
        assert sum(bool(c.get("outputs")) for c in code) >= len(code) // 2, path.name
