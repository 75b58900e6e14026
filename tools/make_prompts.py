"""Write the package's prompt suites (math / code / chat) from the data in ``tools/prompt_templates/``.

    python tools/make_prompts.py --out assets/prompts

writes ``train.jsonl`` and ``eval.jsonl``: one ``{"turns": [prompt], "domain": d}`` record a line, the
format ``dspark_viz.datasets.prompts.load_prompts`` reads. Every prompt is written for dspark_viz; none is copied
from a public benchmark. The output depends only on the template files and the seed, so unchanged
templates give the shipped files byte for byte. Standard library only.

Split. Eval shares no prompt text with train, and it is not just more of the same: it holds out every
third hand-written prompt (index % 3 == 2), templates that train never uses (``eval_only_templates``,
which draw from whole slot lists) and a fifth of every slot list (index % 5 == 4) for the shared
``templates``.

Files. ``common.json`` holds slot lists that several domains use; ``<domain>.json`` holds ``slots``
(name -> list of values), ``handwritten`` prompts, ``templates`` and ``eval_only_templates`` (name ->
template; their order matters). A template is ``{"draw": [step, ...], "text": ...}``. Steps run in
order and bind names; each random step is one call on the suite's shared ``random.Random``, so the
steps' order is part of the output.

    [names, "choice", seq]       one item of seq: a slot or bound name, or a literal list whose
                                 strings are filled as formats once picked
    [names, "sample", seq, k]    also "randint" lo hi, "uniform" lo hi, "randrange" n, "random"
    [name, "ints", n, lo, hi]    a list of n randint(lo, hi)
    [names, "let", expr]         a value computed from bound names
    [name, "format", fmt]        a filled format
    {"if": expr, "then": [step, ...], "else": [step, ...]}
    {"case": expr, "of": [[step, ...], ...]}     runs the list at that index

``names`` is a Python assignment target (``"name, pr"``, ``"(n1, _), (n2, _)"``); a number in a step may
be an expression. ``text`` is a format, or a list of formats of which ``choice`` picks one; a template
without it binds ``text`` in its steps. A format is an f-string without the ``f`` (``{expr}``,
``{expr:spec}``, ``{{`` for a brace; no ``!`` or ``:`` in expr outside brackets). An expression is
arithmetic, comparisons, ``a if c else b``, indexing and slicing, literals and calls to ``HELPERS``: no
attributes, no other names.
"""
from __future__ import annotations

import argparse
import ast
import json
import operator
import random
import string
import sys
from collections import ChainMap
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

DOMAINS = ("math", "code", "chat")
TEMPLATE_DIR = Path(__file__).resolve().parent / "prompt_templates"

HELPERS = {
    "money": lambda x: f"${x:.2f}" if round(x * 100) % 100 else f"${int(round(x))}",  # $2.50, $3
    "cap": lambda s: s[:1].upper() + s[1:],
    "uncap": lambda s: s[:1].lower() + s[1:],
    "article": lambda w: ("an " if w[:1].lower() in "aeiou" else "a ") + w,
    "and_list": lambda xs: ", ".join(map(str, xs[:-1])) + " and " + str(xs[-1]) if len(xs) > 1 else str(xs[0]),
    "join": lambda xs, sep: sep.join(map(str, xs)),
    "abs": abs, "int": int, "min": min, "round": round,
}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.USub: operator.neg,
        ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}


@lru_cache(maxsize=None)
def _parse(expr: str) -> ast.expr:
    return ast.parse(expr.strip(), mode="eval").body


@lru_cache(maxsize=None)
def _target(names: str) -> ast.expr:
    return ast.parse(f"{names} = None").body[0].targets[0]


def _op(node: ast.AST):
    if type(node) not in _OPS:
        raise ValueError(f"operator {type(node).__name__} is not allowed in a template")
    return _OPS[type(node)]


def evaluate(expr: str, env) -> object:
    """The value of a template expression over the bound names ``env``."""
    def ev(n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise NameError(f"{n.id!r} is neither bound nor a slot (in {expr!r})")
            return env[n.id]
        if isinstance(n, ast.BinOp):
            return _op(n.op)(ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp):
            return _op(n.op)(ev(n.operand))
        if isinstance(n, ast.Compare):
            vals = [ev(n.left)] + [ev(c) for c in n.comparators]
            return all(_op(o)(a, b) for o, a, b in zip(n.ops, vals, vals[1:]))
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        if isinstance(n, ast.Subscript):
            return ev(n.value)[ev(n.slice)]
        if isinstance(n, ast.Slice):
            return slice(*(p if p is None else ev(p) for p in (n.lower, n.upper, n.step)))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in HELPERS and not n.keywords:
            return HELPERS[n.func.id](*map(ev, n.args))
        raise ValueError(f"{ast.unparse(n)!r} is not allowed in a template expression ({expr!r})")
    return ev(_parse(expr))


def fill(fmt: str, env) -> str:
    """A format filled from ``env``: ``{expr}`` and ``{expr:spec}`` as in an f-string."""
    out = []
    for literal, field, spec, conv in string.Formatter().parse(fmt):
        out.append(literal)
        if field is not None:
            if conv or not field:
                raise ValueError(f"format fields are {{expr}} or {{expr:spec}}, in {fmt!r}")
            out.append(format(evaluate(field, env), spec))
    return "".join(out)


def _fill_item(item, env):
    if isinstance(item, str):
        return fill(item, env)
    return [_fill_item(x, env) for x in item] if isinstance(item, list) else item


def _assign(target: ast.AST, value, env) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return
    if not isinstance(target, ast.Tuple) or not isinstance(value, list) or len(value) != len(target.elts):
        raise ValueError(f"cannot bind {ast.unparse(target)!r} to {value!r}")
    for t, v in zip(target.elts, value):
        _assign(t, v, env)


def _draw(op: str, args: list, rng: random.Random, env):
    def num(a):
        return evaluate(a, env) if isinstance(a, str) else a
    if op in ("choice", "sample"):
        seq = args[0] if isinstance(args[0], list) else evaluate(args[0], env)
        if op == "sample":
            return rng.sample(seq, num(args[1]))
        return _fill_item(rng.choice(seq), env) if isinstance(args[0], list) else rng.choice(seq)
    if op in ("randint", "uniform"):
        return getattr(rng, op)(num(args[0]), num(args[1]))
    if op == "randrange":
        return rng.randrange(num(args[0]))
    if op == "random":
        return rng.random()
    if op == "ints":
        return [rng.randint(num(args[1]), num(args[2])) for _ in range(num(args[0]))]
    if op == "let":
        return evaluate(args[0], env)
    if op == "format":
        return fill(args[0], env)
    raise ValueError(f"unknown template step {op!r}")


def _run(steps: list, rng: random.Random, env) -> None:
    for step in steps:
        if isinstance(step, dict) and "if" in step:
            _run(step["then"] if evaluate(step["if"], env) else step.get("else", []), rng, env)
        elif isinstance(step, dict):
            _run(step["of"][evaluate(step["case"], env)], rng, env)
        else:
            names, op, *args = step
            _assign(_target(names), _draw(op, args, rng, env), env)


def render(template: dict, rng: random.Random, slots: dict[str, list]) -> str:
    """One prompt from a template, drawing slot values from ``slots``."""
    env = ChainMap({}, slots)
    _run(template.get("draw", []), rng, env)
    if "text" in template:
        text = template["text"]
        env["text"] = fill(rng.choice(text) if isinstance(text, list) else text, env)
    return env["text"].strip()


class Spec(NamedTuple):
    """The template files, read: slot lists, and per domain hand-written prompts and templates."""
    slots: dict[str, list]
    handwritten: dict[str, list[str]]
    templates: dict[str, dict[str, dict]]
    eval_only: dict[str, dict[str, dict]]


def load_spec(folder: str | Path = TEMPLATE_DIR) -> Spec:
    files = {name: json.loads((Path(folder) / f"{name}.json").read_text(encoding="utf-8"))
             for name in ("common",) + DOMAINS}
    slots: dict[str, list] = {}
    for name, data in files.items():
        for key, values in data.get("slots", {}).items():
            if key in slots:
                raise ValueError(f"{name}.json: slot {key!r} is defined twice")
            slots[key] = values
    return Spec(slots, {d: files[d]["handwritten"] for d in DOMAINS},
                {d: files[d]["templates"] for d in DOMAINS}, {d: files[d]["eval_only_templates"] for d in DOMAINS})


def slot_part(slots: dict[str, list], part: str) -> dict[str, list]:
    """The slot values one split draws from: "train" (4 in 5), "eval" (index % 5 == 4) or "all"."""
    keep = {"train": lambda i: i % 5 != 4, "eval": lambda i: i % 5 == 4, "all": lambda i: True}[part]
    return {k: [v for i, v in enumerate(vals) if keep(i)] for k, vals in slots.items()}


def split_handwritten(prompts: list[str]) -> tuple[list[str], list[str]]:
    """(train, eval): every third hand-written prompt is held out for eval."""
    return [p for i, p in enumerate(prompts) if i % 3 != 2], [p for i, p in enumerate(prompts) if i % 3 == 2]


def normalize(text: str) -> str:
    """The key two prompts must not share: lower case, runs of white space as one space."""
    return " ".join(text.lower().split())


def _round_robin(rng: random.Random, templates: dict[str, dict], slots: dict, need: int, seen: set[str],
                 tries: int = 40) -> list[str]:
    """Draw up to ``need`` new prompts, one template at a time in turn, so no template dominates.

    A template that fails ``tries`` times in a row to give an unseen prompt is retired.
    """
    out: list[str] = []
    active = list(templates.values())
    rng.shuffle(active)
    while len(out) < need and active:
        still = []
        for template in active:
            if len(out) >= need:
                still.append(template)
                continue
            for _ in range(tries):
                text = render(template, rng, slots)
                if normalize(text) not in seen:
                    seen.add(normalize(text))
                    out.append(text)
                    still.append(template)
                    break
        active = still
    return out


def build_suites(seed: int = 0, n_train: int = 2400, n_eval_per_domain: int = 80,
                 spec: Spec | None = None) -> tuple[list[dict], list[dict]]:
    """(train, eval) records ``{"turns": [prompt], "domain": d}``, deterministic for a seed.

    Train has ``n_train`` records split evenly across the domains and shuffled together; eval has
    ``n_eval_per_domain`` per domain, grouped by domain, mixing held-out hand-written prompts (about a
    quarter), eval-only templates and shared templates filled with held-out slot values.
    """
    if n_train < 0 or n_eval_per_domain < 0:
        raise ValueError("n_train and n_eval_per_domain must be >= 0")
    spec = spec or load_spec()
    rng = random.Random(seed)
    train_slots, eval_slots, all_slots = (slot_part(spec.slots, p) for p in ("train", "eval", "all"))
    seen: set[str] = set()

    eval_recs: list[dict] = []  # eval first, so train never reuses its text
    for d in DOMAINS:
        hw_eval = [p for p in split_handwritten(spec.handwritten[d])[1] if normalize(p) not in seen]
        rng.shuffle(hw_eval)
        hw = hw_eval[:min(len(hw_eval), round(n_eval_per_domain * 0.25))]
        seen.update(normalize(p) for p in hw)
        rest = n_eval_per_domain - len(hw)
        only = _round_robin(rng, spec.eval_only[d], all_slots, (rest + 1) // 2, seen)
        shared = _round_robin(rng, spec.templates[d], eval_slots, rest - len(only), seen)
        texts = hw + only + shared
        if len(texts) < n_eval_per_domain:
            raise ValueError(f"could only build {len(texts)} unique eval prompts for {d!r}")
        rng.shuffle(texts)
        eval_recs += [{"turns": [t], "domain": d} for t in texts]

    train_recs: list[dict] = []  # the other hand-written prompts + shared templates on train slot values
    base, extra = divmod(n_train, len(DOMAINS))
    for i, d in enumerate(DOMAINS):
        need = base + (1 if i < extra else 0)
        hw = []
        for p in split_handwritten(spec.handwritten[d])[0]:
            if normalize(p) not in seen:
                seen.add(normalize(p))
                hw.append(p)
        texts = hw + _round_robin(rng, spec.templates[d], train_slots, max(0, need - len(hw)), seen)
        rng.shuffle(texts)
        if len(texts) < need:
            raise ValueError(f"could only build {len(texts)} unique train prompts for {d!r}")
        train_recs += [{"turns": [t], "domain": d} for t in texts[:need]]
    rng.shuffle(train_recs)
    return train_recs, eval_recs


def write_suites(out_dir: str | Path, **kw) -> dict[str, Path]:
    """Write ``train.jsonl`` and ``eval.jsonl`` under ``out_dir`` (created if needed).

    Keyword arguments go to :func:`build_suites`. Returns ``{"train": path, "eval": path}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"train": out / "train.jsonl", "eval": out / "eval.jsonl"}
    for split, records in zip(paths, build_suites(**kw)):
        with paths[split].open("w", encoding="utf-8", newline="\n") as f:
            f.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/make_prompts.py", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for train.jsonl and eval.jsonl")
    ap.add_argument("--templates", default=str(TEMPLATE_DIR), help="folder of the template files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=2400)
    ap.add_argument("--n-eval-per-domain", type=int, default=80)
    a = ap.parse_args(argv)
    paths = write_suites(a.out, seed=a.seed, n_train=a.n_train, n_eval_per_domain=a.n_eval_per_domain,
                         spec=load_spec(a.templates))
    for split, path in paths.items():
        recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        counts = {d: sum(r["domain"] == d for r in recs) for d in DOMAINS}
        print(f"{split}: {len(recs)} prompts {counts} -> {path} ({path.stat().st_size / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
