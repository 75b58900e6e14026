"""What a GPU run brings back, within the device's limits, and how it is put together again here.

    python tools/gpu_bundle.py out --drafters D --logs L --dest OUT --state S.json   (on the GPU machine)
    python tools/gpu_bundle.py join --dest gpu-run FOLDER [FOLDER …]                 (here)
    python tools/gpu_bundle.py check OUT

A call brings back at most ``FILES`` files of at most ``FILE_BYTES`` each, ``TOTAL_BYTES`` in all, named in
letters, digits, '.', '_' and '-'. ``out`` writes one bundle: ``resultsN.tar.gz`` (the logs, every drafter's card
and the bundle's plan) and the weights of as many drafters as fit, in the order given, each split into parts of
at most ``FILE_BYTES``; the drafters that do not fit wait on the machine for the next ``out`` (``state`` remembers
what went). ``join`` puts the parts together again and checks each weights file against its card's SHA-256.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tarfile
from pathlib import Path

FILES, FILE_BYTES, TOTAL_BYTES = 8, 16 << 20, 64 << 20
RESERVE = 2 << 20                    # room kept for the results archive
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def n_parts(size: int, part: int = FILE_BYTES) -> int:
    return max(1, -(-size // part))


def plan_bundle(sizes: dict[str, int], files: int = FILES, total: int = TOTAL_BYTES, part: int = FILE_BYTES,
                reserve: int = RESERVE) -> list[str]:
    """The drafters (name → weights bytes, in priority order) whose parts fit beside one results archive:
    whole drafters only, a later one taken where an earlier did not fit."""
    left_files, left_bytes, take = files - 1, total - reserve, []
    for name, size in sizes.items():
        k = n_parts(size, part)
        if k <= left_files and size <= left_bytes:
            take.append(name)
            left_files, left_bytes = left_files - k, left_bytes - size
    return take


def write_parts(src: Path, dest: Path, part: int = FILE_BYTES) -> list[str]:
    """``src`` cut into ``dest/src.name.partK`` files of at most ``part`` bytes → their names."""
    names = []
    with open(src, "rb") as f:
        for k in range(n_parts(src.stat().st_size, part)):
            name = f"{src.name}.part{k}"
            (dest / name).write_bytes(f.read(part))
            names.append(name)
    return names


def out(drafters: Path, logs: Path, dest: Path, state_file: Path, order: list[str]) -> dict:
    state = json.loads(state_file.read_text()) if state_file.exists() else {"sent": [], "bundles": 0}
    weights = {p.stem: p for p in sorted(drafters.glob("*.safetensors"))}
    names = [n for n in order if n in weights] + sorted(n for n in weights if n not in order)
    waiting = {n: weights[n].stat().st_size for n in names if n not in state["sent"]}
    take = plan_bundle(waiting)
    dest.mkdir(parents=True, exist_ok=True)
    plan = {"bundle": state["bundles"] + 1, "drafters": {}, "left": [n for n in waiting if n not in take]}
    for n in take:
        card = json.loads(weights[n].with_suffix(".json").read_text())
        parts = write_parts(weights[n], dest)
        plan["drafters"][n] = {"parts": parts, "bytes": weights[n].stat().st_size, "sha256": sha256(weights[n]),
                               "card_sha256": card.get("sha256")}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if logs.is_dir():
            tar.add(logs, arcname="logs")
        for card in sorted(drafters.glob("*.json")):
            tar.add(card, arcname=f"cards/{card.name}")
        data = json.dumps(plan, indent=1).encode()
        info = tarfile.TarInfo("plan.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (dest / f"results{plan['bundle']}.tar.gz").write_bytes(buf.getvalue())
    state["sent"] += take
    state["bundles"] += 1
    state_file.write_text(json.dumps(state))
    check(dest)
    return plan


def check(folder: Path, files: int = FILES, file_bytes: int = FILE_BYTES, total: int = TOTAL_BYTES) -> list[Path]:
    """The files under ``folder`` as the device brings them back, or ValueError naming the limit they break."""
    found = [p for p in folder.rglob("*") if p.is_file()]
    bad = [p for p in found if not all(NAME.match(x) for x in p.relative_to(folder).parts)
           or len(p.relative_to(folder).parts) > 3]
    if bad:
        raise ValueError(f"names or depth the device does not bring back: {bad}")
    if len(found) > files:
        raise ValueError(f"{len(found)} files: at most {files} come back")
    big = [p for p in found if p.stat().st_size > file_bytes]
    if big:
        raise ValueError(f"over {file_bytes >> 20} MiB: {big}")
    size = sum(p.stat().st_size for p in found)
    if size > total:
        raise ValueError(f"{size / 2 ** 20:.1f} MiB in all: at most {total >> 20} MiB come back")
    return found


def join(sources: list[Path], dest: Path) -> dict:
    """Every bundle under ``sources`` → ``dest``: drafters (weights + card), logs, plans; SHA-256 checked."""
    dest.mkdir(parents=True, exist_ok=True)
    got = {}
    for archive in sorted(p for s in sources for p in Path(s).glob("results*.tar.gz")):
        with tarfile.open(archive) as tar:
            tar.extractall(dest / archive.name.removesuffix(".tar.gz"), filter="data")
        plan = json.loads((dest / archive.name.removesuffix(".tar.gz") / "plan.json").read_text())
        for name, d in plan["drafters"].items():
            blob = b"".join((archive.parent / p).read_bytes() for p in d["parts"])
            if hashlib.sha256(blob).hexdigest() != d["sha256"] or len(blob) != d["bytes"]:
                raise ValueError(f"{name}: the parts do not make the file that was sent")
            (dest / f"{name}.safetensors").write_bytes(blob)
            card = dest / archive.name.removesuffix(".tar.gz") / "cards" / f"{name}.json"
            (dest / f"{name}.json").write_bytes(card.read_bytes())
            got[name] = d["bytes"]
    return got


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("out")
    o.add_argument("--drafters", type=Path, required=True)
    o.add_argument("--logs", type=Path, required=True)
    o.add_argument("--dest", type=Path, required=True)
    o.add_argument("--state", type=Path, required=True)
    o.add_argument("--order", default="dspark_markov,dflash,dspark_rnn,eagle")
    j = sub.add_parser("join")
    j.add_argument("--dest", type=Path, required=True)
    j.add_argument("sources", type=Path, nargs="+")
    c = sub.add_parser("check")
    c.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "out":
            print(json.dumps(out(a.drafters, a.logs, a.dest, a.state, a.order.split(",")), indent=1))
        elif a.cmd == "join":
            print(json.dumps(join(a.sources, a.dest), indent=1))
        else:
            print(f"{len(check(a.folder))} files within the limits")
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"gpu_bundle: {e}")


if __name__ == "__main__":
    main()
