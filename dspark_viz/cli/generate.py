"""``dspark-viz generate``: decode one prompt and print it, accepted / rejected / bonus tokens coloured."""
from __future__ import annotations

import argparse
import os
import sys

from .. import metrics
from ..cost import named_profile
from ..decode import check_settings, generate_rounds
from ..drafters import NAMES, load_drafter
from ..drafters.deepspec_config import feature_layers_for, is_drafter_dir
from ..drafters.neural import is_card_path
from ..evaluation.dtype_choice import dtype_for
from ..model import target as model_target  # looked up per call: tests substitute load_target
from ..scheduler import POLICY_NAMES, make_policy
from .common import set_threads

# -- terminal colours ------------------------------------------------------------------------------
ANSI = {"accepted": "\x1b[32m", "rejected": "\x1b[9;31m", "bonus": "\x1b[33m", "dim": "\x1b[2m", "reset": "\x1b[0m"}


def use_color(flag_no_color: bool, stream=None) -> bool:
    stream = stream or sys.stdout
    return not flag_no_color and "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, kind: str, color: bool) -> str:
    return f"{ANSI[kind]}{text}{ANSI['reset']}" if color and text else text


def render_round(r, color: bool) -> str:
    """One round as text: accepted drafts, the rejected draft (struck, red), then the bonus token."""
    parts = [paint(d.text, "accepted", color) for d in r.drafts if d.status == "accepted"]
    if color:                                  # a struck-out newline would still break the line: show ↵
        parts += [paint(d.text.replace("\n", "↵"), "rejected", color) for d in r.drafts if d.status == "rejected"]
    if r.bonus is not None:
        parts.append(paint(r.bonus_text, "bonus", color))
    return "".join(parts)


def summary_line(trace) -> str:
    ts = metrics.time_split(trace)
    return (f"τ = {metrics.tau(trace):.2f} tokens/round · {trace.n_generated} tokens in {len(trace.rounds)} rounds "
            f"· {metrics.tokens_per_second(trace):.1f} tok/s · time: draft {ts['draft']:.0%} verify "
            f"{ts['verify']:.0%} schedule {ts['schedule']:.0%} other {ts['other']:.0%} · "
            f"drafter {trace.meta.get('drafter')}, policy {trace.meta.get('policy')}"
            + (f" + fallback (drafted in {metrics.drafted_share(trace):.0%} of rounds)" if trace.meta.get("fallback")
               else "") + f", T = {trace.meta.get('temperature')}")


# -- generate ----------------------------------------------------------------------------------------
PLAIN_NAMES = ("none", "plain")


def add_generate(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("prompt", help="the user message (the chat template is applied)")
    ap.add_argument("--drafter", default="lookup", help="lookup (default), a shipped neural drafter "
                    "(dspark, dspark-rnn, dflash, eagle), a drafter card FILE.json, a DeepSpec checkpoint "
                    "folder, NAME+lookup, or none for plain decoding")
    ap.add_argument("--gamma", type=int, default=None, help="block size of the lookup drafter (default 7)")
    ap.add_argument("--policy", default="fixed", help=f"{', '.join(POLICY_NAMES)} (fixed: ℓ = γ)")
    ap.add_argument("--theta", type=float, default=0.5, help="threshold of the threshold policy")
    ap.add_argument("--sps-profile", default=None, help="SPS profile for hardware-aware / async-global: "
                    "gpu-like, jagged, cpu or a .json path (default gpu-like)")
    ap.add_argument("--fallback", action="store_true",
                    help="the speculation gate: decode plainly while drafting commits fewer tokens/s than a plain "
                         "step (judged from earlier rounds; lossless)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace-out", default=None, metavar="FILE.json", help="save the Trace as JSON")
    ap.add_argument("--target", default=None, help="local HF folder or .gguf (default: embedded SmolLM2)")
    ap.add_argument("--dtype", default=None, choices=["fp32", "bf16"], help="default: fp32 on CPU, bf16 on GPU")
    ap.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--no-color", action="store_true", help="plain text (also automatic when not a terminal)")


def _make_policy(name: str, gamma: int, theta: float):
    key = name.strip().lower()
    if key == "fixed":
        return make_policy(f"fixed-{gamma}")
    if key == "threshold":
        return make_policy("threshold", theta=theta)
    return make_policy(key)


def run_generate(a: argparse.Namespace) -> int:
    # cheap checks first: a typo should not cost a model load
    if not a.prompt.strip():
        raise ValueError("the prompt is empty: type a question or an instruction")
    check_settings(a.max_new_tokens, a.temperature)
    drafter_name = a.drafter.strip()
    if drafter_name.lower() in NAMES + PLAIN_NAMES:
        drafter_name = drafter_name.lower()
    elif not (is_card_path(base := drafter_name.removesuffix("+lookup")) or is_drafter_dir(base)):
        raise ValueError(f"unknown drafter {a.drafter!r}: choose one of {', '.join(NAMES + PLAIN_NAMES)}, "
                         f"a drafter card FILE.json, or a DeepSpec checkpoint folder")
    if a.gamma is not None and a.gamma < 1:
        raise ValueError(f"--gamma must be ≥ 1, got {a.gamma}")
    if a.gamma is not None and drafter_name != "lookup":
        raise ValueError("--gamma applies to the lookup drafter only; a neural drafter's γ is fixed by its "
                         "training (use --policy fixed-<ℓ> to verify fewer tokens)")
    policy = _make_policy(a.policy, a.gamma or 7, a.theta) if drafter_name not in PLAIN_NAMES else None
    sps = None
    if a.sps_profile:
        sps = named_profile(a.sps_profile)
    if a.trace_out and os.path.isdir(a.trace_out):
        raise ValueError(f"--trace-out {a.trace_out} is a folder: give a file name")
    set_threads(a.threads)

    target = model_target.load_target(a.target, device=a.device, dtype=dtype_for(a.device, a.dtype, a.target),
                                      feature_layers=feature_layers_for(drafter_name))
    drafter = None
    if drafter_name not in PLAIN_NAMES:
        drafter = load_drafter(drafter_name, target, **({"gamma": a.gamma} if a.gamma else {}))   # (lookup only)
        if a.policy.strip().lower() == "fixed":
            policy = _make_policy("fixed", drafter.gamma, a.theta)
        if policy.needs_confidence and not drafter.has_confidence:
            raise ValueError(f"policy {policy.name!r} needs confidences; drafter {drafter.name!r} has no "
                             f"confidence head (use --policy fixed or a neural drafter)")
    rounds = generate_rounds(target, drafter, a.prompt, policy=policy, temperature=a.temperature,
                             max_new_tokens=a.max_new_tokens, seed=a.seed, sps=sps,
                             fallback=True if getattr(a, "fallback", False) and drafter is not None else None)
    color = use_color(a.no_color)
    out = sys.stdout
    if color:                                                     # stream round by round
        for r in rounds:
            if r.index == 0:
                out.write(paint(rounds.trace.first_text, "bonus", color))
            out.write(render_round(r, color))
            out.flush()
        if not rounds.trace.rounds:
            out.write(paint(rounds.trace.first_text, "bonus", color))
        out.write("\n")
    else:
        for _ in rounds:
            pass
        out.write(rounds.trace.text() + "\n")
    trace = rounds.trace
    print(summary_line(trace), file=sys.stderr)
    if color:
        print(f"{paint('accepted draft', 'accepted', True)} · {paint('rejected draft', 'rejected', True)} · "
              f"{paint('target token (bonus)', 'bonus', True)}", file=sys.stderr)
    if a.trace_out:
        trace.to_json(a.trace_out)
        print(f"trace written to {a.trace_out}", file=sys.stderr)
    return 0
