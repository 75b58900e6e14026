"""Repository hygiene: the shipped assets stay light (DESIGN.md: all of dspark_viz/assets/ under 64 MB)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_assets_under_64_mb():
    size = sum(p.stat().st_size for p in (ROOT / "dspark_viz" / "assets").rglob("*") if p.is_file())
    assert 0 < size < 64_000_000, f"assets/ holds {size / 1e6:.1f} MB"


def test_shipped_weights_are_safetensors():
    files = [p for p in (ROOT / "dspark_viz" / "assets").rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in {".pt", ".pth", ".bin", ".pkl", ".ckpt"}]
    assert any(p.suffix == ".safetensors" for p in files)
