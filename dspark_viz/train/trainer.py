"""Training loop for every drafter algorithm, on cached target features; resumable.

Legend: n sequence length, P prompt length, N anchors (blocks) per sequence, γ block size,
d hidden size, V_d draft vocabulary, k 1-based slot.

Anchors are sampled inside the assistant span (P ≤ p ≤ n−2); block slot k predicts x_{p+k}
with the teacher-forced previous token x_{p+k−1}; the target distribution for slot k comes from
the cached final-norm hidden state at position p+k−1. The same data, steps and optimiser for
every algorithm, and the same losses (0.1·CE + 0.9·L1, w_k = exp(−(k−1)/γ)); DSpark adds its confidence
term. dspark (Markov), dspark-rnn, dflash (no heads), eagle (unrolled γ steps). A block's labels, targets and
hidden states are in blocks.py; a run goes start_run → choose_precision_and_loss → train_step … → save_checkpoint.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..drafters.config import DrafterConfig
from ..drafters.neural import build_model, init_from_target, load_drafter_file, save_drafter
from ..memo import keyed
from .config import TrainConfig
from .data import FeatureStore
from .online import with_features
from . import fused
from .blocks import dspark_hidden, dspark_hidden_batched, eagle_hidden, label_parts, target_row_parts
from .cards import device_name, warm_record
from .losses import drafter_loss, loss_terms, position_weights
from .precision import resolve_precision
from .schedule import FIT_PROBE, fitted_steps, lr_at
from .vocab import build_draft_vocab, remap_vocab


def _anchors(s: dict, n_blocks: int, gen: torch.Generator) -> torch.Tensor:
    lo, hi = s["prompt_len"], s["n"] - 2
    perm = torch.randperm(hi - lo + 1, generator=gen)[:n_blocks] + lo
    return perm.sort().values                                                           # (N,)


def on_device(s: dict, dev: torch.device) -> dict:
    """A cached sequence with its tensors on ``dev`` (the drafter's device); the same dict where they already are."""
    if s["ids"].device.type == dev.type:
        return s
    return {k: v.to(dev, non_blocking=True) if torch.is_tensor(v) else v for k, v in s.items()}


def target_rows(seqs: list[dict], src: list[torch.Tensor], W: torch.Tensor) -> torch.Tensor:
    """``target_row_parts`` gathered: (ΣN_i, γ, V_d)."""
    p_u, row_of = target_row_parts(seqs, src, W)
    return p_u[row_of]


def vocab_weight(model, dtype: torch.dtype) -> torch.Tensor:
    """The frozen draft-vocabulary rows of the LM head in the compute dtype, contiguous, made once per dtype and
    device (casting a transposed view at every product costs more than the product itself)."""
    W_vd = model.W_vd
    return keyed(model, "vocab_weight", key=(dtype, W_vd.device, W_vd.data_ptr()),
                 build=lambda: W_vd.detach().to(dtype).contiguous())                    # (V_d, d)


def forward_blocks(model, seqs: list[dict], anchors: list[torch.Tensor], rows: bool = False, conf_grad: bool = True,
                   batched: bool | None = None):
    """Every sequence's blocks in one pass after the backbone: the backbone runs per sequence on a CPU and over all
    sequences in one call on an accelerator (``batched``: None chooses so; EAGLE's unroll runs per sequence), the
    vocabulary products, the heads and p_target once over all blocks; without ``conf_grad`` the
    confidence head reads h and the token embedding detached (its loss then trains the head alone).
    → logits (N, γ, V_d) = U + B, conf logits (N, γ) or None, labels, p_target (N, γ, V_d), mask (N, γ);
    with ``rows`` p_target as (distinct rows (U, V_d), row_of (N, γ)) — the loss gathers them itself."""
    g = model.cfg.gamma
    if model.cfg.algo == "eagle":
        h = torch.cat([eagle_hidden(model, s, a) for s, a in zip(seqs, anchors)])        # (N, γ, d)
    elif batched if batched is not None else anchors[0].device.type != "cpu":          # one call for all
        h = torch.cat(dspark_hidden_batched(model, seqs, anchors))
    else:
        h = torch.cat([dspark_hidden(model, s, a) for s, a in zip(seqs, anchors)])
    lab, prev, src, m = zip(*(label_parts(model, s, a, g) for s, a in zip(seqs, anchors)))
    lab, prev, m = torch.cat(lab), torch.cat(prev), torch.cat(m)
    dev = h.device.type
    dt = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else torch.float32
    W = vocab_weight(model, dt)
    p_t = target_row_parts(seqs, list(src), W) if rows else target_rows(seqs, list(src), W)
    U = F.linear(h.to(dt), W)                                                            # (N, γ, V_d)
    head = getattr(model, "head", None)
    if head is None:
        return U, None, lab, p_t, m
    N = h.shape[0]
    if head.kind == "markov":
        e = head.W1(prev)                                                               # (N, γ, r)
        B = head.W2(e)
    else:
        state, bs, es = head.init_state(N, h.device), [], []
        for k in range(g):
            b, state, e_k = head.step(prev[:, k], h[:, k], state)
            bs.append(b)
            es.append(e_k)
        B, e = torch.stack(bs, 1), torch.stack(es, 1)
    conf = None
    if model.conf is not None:
        hc, ec = (h, e) if conf_grad else (h.detach(), e.detach())
        conf = model.conf(hc.reshape(N * g, -1), ec.reshape(N * g, -1)).view(N, g)
    return U + B, conf, lab, p_t, m


def dspark_forward(model, s: dict, anchors: torch.Tensor):
    """One sequence (DSpark / DFlash-style): → logits (N, γ, V_d), conf logits (N, γ) or None, labels, p_t, mask."""
    return forward_blocks(model, [s], [anchors])


def eagle_forward(model, s: dict, anchors: torch.Tensor):
    """One sequence (EAGLE-style, unrolled): → logits (N, γ, V_d), None, labels, p_t, mask."""
    return forward_blocks(model, [s], [anchors])


def loss_weights(algo: str, tc: TrainConfig) -> dict:
    """The same CE + L1 terms for every drafter; only DSpark has a confidence head to train."""
    return dict(w_ce=tc.w_ce, w_l1=tc.w_l1, w_conf=tc.w_conf if algo.startswith("dspark") else 0.0)


def batch_loss(model, seqs: list[dict], tc: TrainConfig, gen: torch.Generator, terms=loss_terms):
    """The weighted loss over ``tc.blocks_per_seq`` random blocks of each sequence, all in one pass; ``terms``:
    ``losses.loss_terms`` or the same function compiled (fused.py)."""
    dev = model.W_vd.device
    seqs = [on_device(s, dev) for s in with_features(seqs)]
    anchors = [_anchors(s, tc.blocks_per_seq, gen).to(dev) for s in seqs]
    logits, conf, lab, (p_u, row_of), m = forward_blocks(model, seqs, anchors, rows=True, conf_grad=tc.conf_grad)
    w = position_weights(model.cfg.gamma, tc.decay, device=dev)
    return drafter_loss(logits, lab, p_u, m, w, conf, row_of=row_of, terms=terms,
                        **loss_weights(model.cfg.algo, tc))


def faster_precision(model, seqs: list[dict], tc: TrainConfig, device_type: str, steps: int = 3) -> str:
    """fp32 or bf16: whichever runs a forward + backward of this model on these sequences faster (interleaved,
    after a warm-up of each; gradients are discarded)."""
    gen = torch.Generator().manual_seed(0)
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for i in range(steps + 1):
        for prec in (("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32")):
            batch = [seqs[j] for j in torch.randint(len(seqs), (tc.seqs_per_step,), generator=gen)]
            t0 = time.perf_counter()
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=prec == "bf16"):
                loss, _ = batch_loss(model, batch, tc, torch.Generator().manual_seed(i))
            loss.backward()
            if i:
                times[prec].append(time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    return min(times, key=lambda p: sum(times[p]))


def make_optimizer(params: list, tc: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (β = 0.9, 0.95), fused: one kernel per step for all parameters, on CPU and CUDA."""
    return torch.optim.AdamW(params, lr=tc.lr, betas=(0.9, 0.95), weight_decay=tc.weight_decay, fused=True)


@torch.no_grad()
def evaluate(model, val: list[dict], tc: TrainConfig, n: int = 48) -> dict:
    if not val:
        return {}
    gen = torch.Generator().manual_seed(1234)
    _, st = batch_loss(model, val[:n], tc, gen)
    return st


def _warm_start(model, target, out, log):
    """Weights of an exported drafter with the same config (its optimiser state is not shipped),
    moved onto ``model``'s draft vocabulary (built from the current data) when that differs."""

    try:
        loaded = load_drafter_file(out, target)
    except (ValueError, FileNotFoundError) as e:
        log(f"not warm-starting from {out}: {e}")
        return None
    shipped = loaded.model
    same = lambda c: {k: v for k, v in c.to_dict().items() if k != "draft_vocab"}        # noqa: E731
    if same(shipped.cfg) != same(model.cfg):
        log(f"not warm-starting from {out}: its config differs")
        return None
    st = remap_vocab(shipped.state_dict(), shipped.vocab_ids.cpu(), model.vocab_ids.cpu(), model.state_dict())
    kept = len(set(shipped.vocab_ids.tolist()) & set(model.vocab_ids.tolist()))
    model.load_state_dict(st)
    log(f"warm-starting from the exported drafter {out} ({kept}/{model.vocab_ids.numel()} vocabulary rows kept)")
    return model, model.vocab_ids, warm_record(loaded.card)


@dataclass
class TrainRun:
    """One drafter's training run between steps: the model, its optimiser, the data and where the run stands."""
    model: torch.nn.Module
    cfg: DrafterConfig
    vocab_ids: torch.Tensor                     # (V_d,) the draft vocabulary, as full-vocabulary ids
    warm_start: dict | None                     # the exported drafter it started from (card record), or None
    tr: list[dict]                              # training sequences
    val: list[dict]                             # validation sequences
    params: list
    opt: torch.optim.Optimizer
    step: int = 0
    elapsed: float = 0.0                        # seconds trained by earlier calls
    seen: int = 0                               # label positions trained on
    card: dict = field(default_factory=dict)    # the card's "train" record


def start_run(target, algo: str, tr: list[dict], val: list[dict], tc: TrainConfig, ck: dict | None,
              cfg_overrides: dict | None, src, log) -> TrainRun:
    """The model (from the checkpoint ``ck``, a warm start from the drafter file ``src``, or initialised from
    the target), its optimiser, and the step it resumes at."""
    if ck is not None:
        cfg = DrafterConfig.from_dict(json.loads(ck["cfg"]))
        vocab_ids = ck["vocab_ids"]
    else:
        cfg = DrafterConfig.for_target(target, algo, **(cfg_overrides or {}))
        vocab_ids = build_draft_vocab(tr, cfg.draft_vocab, set(target.stop_ids), target.vocab_size)
    model = build_model(cfg, target, vocab_ids)
    warm = _warm_start(model, target, src, log) if ck is None and src is not None and Path(src).exists() else None
    warm_start = ck.get("warm_start") if ck is not None else None
    if warm is not None:                 # continue from the shipped drafter (e.g. on a new machine)
        model, vocab_ids, warm_start = warm
    elif ck is None and cfg.init_from_target:
        init_from_target(model, target)
    dev = model.W_vd.device
    if dev.type != "cpu":                         # the cache onto the accelerator once, not a copy every step
        tr, val = [on_device(s, dev) for s in tr], [on_device(s, dev) for s in val]
    params = [p for p in model.parameters() if p.requires_grad]
    run = TrainRun(model, cfg, vocab_ids, warm_start, tr, val, params, make_optimizer(params, tc))
    if ck is not None:
        model.load_state_dict(ck["model"])
        run.opt.load_state_dict(ck["opt"])
        run.step, run.elapsed, run.seen = int(ck["step"]), float(ck["elapsed"]), int(ck["positions"])
        log(f"resumed {algo} at step {run.step} ({run.elapsed / 60:.1f} min trained)")
    return run


def _data_record(tr: list[dict]) -> dict:
    return dict(data_sequences=len(tr), data_tokens=sum(s["n"] - s["prompt_len"] for s in tr))


def choose_precision_and_loss(run: TrainRun, target, tc: TrainConfig, log):
    """fp32 or bf16 (``tc.precision``; "time": whichever runs faster here) and the loss terms, compiled where
    that pays for the steps left (fused.py), both written to the card. → (autocast context, loss terms)."""
    model = run.model
    model.train()
    precision = resolve_precision(tc.precision, target.device)
    if precision == "time":
        precision = faster_precision(model, run.tr, tc, target.device.type)
        log(f"training precision on this CPU: {precision} (timed against the other)")
    autocast = torch.autocast(target.device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    run.card["precision"] = precision

    def probe(fn):                               # one step's loss + backward through fn, gradients discarded
        with autocast:
            batch_loss(model, run.tr[: tc.seqs_per_step], tc, torch.Generator().manual_seed(0), fn)[0].backward()
        model.zero_grad(set_to_none=True)

    terms = fused.terms_or_eager(tc.compile, tc.steps - run.step, probe, log)
    run.card["loss"] = "compiled" if terms is not loss_terms else "eager"
    return autocast, terms


def train_step(run: TrainRun, tc: TrainConfig, gen: torch.Generator, terms, autocast) -> dict:
    """One optimiser step on ``tc.seqs_per_step`` random training sequences (learning rate of this step,
    gradients clipped to norm 1). → the step's loss statistics."""
    for gp in run.opt.param_groups:
        gp["lr"] = lr_at(run.step, tc)
    idx = torch.randint(len(run.tr), (tc.seqs_per_step,), generator=gen)
    with autocast:
        loss, st = batch_loss(run.model, [run.tr[i] for i in idx], tc, gen, terms)
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(run.params, 1.0)
    run.opt.step()
    run.step += 1
    run.seen += st["positions"]
    return st


def save_checkpoint(run: TrainRun, target, ckpt_path: Path, out, tc: TrainConfig, elapsed: float,
                    logf) -> dict | None:
    """The resumable checkpoint (written beside, then moved over the old one); with ``out``, the drafter file
    and its card too, after an evaluation on the validation sequences. → that evaluation, or None."""
    torch.save({"model": run.model.state_dict(), "opt": run.opt.state_dict(), "step": run.step, "elapsed": elapsed,
                "positions": run.seen, "cfg": json.dumps(run.cfg.to_dict()), "vocab_ids": run.vocab_ids,
                "schedule_steps": tc.steps,
                **({"warm_start": run.warm_start} if run.warm_start else {})},
               str(ckpt_path) + ".tmp")
    Path(str(ckpt_path) + ".tmp").replace(ckpt_path)
    if out is None:
        return None
    ev = evaluate(run.model, run.val, tc)
    save_drafter(run.model, target, out, {"train": dict(run.card, steps=run.step, minutes=round(elapsed / 60, 1),
                                                        positions=run.seen,
                                                        positions_per_s=round(run.seen / max(elapsed, 1e-9))),
                                          "val": ev})
    logf.write(json.dumps({"step": run.step, "val": ev}) + "\n")
    logf.flush()
    return ev


def train(target, algo: str, feat_dir: str | Path, run_dir: str | Path, out: str | Path | None = None,
          tc: TrainConfig = TrainConfig(), minutes: float | None = None, cfg_overrides: dict | None = None,
          store: FeatureStore | None = None, log=print, stop_at: int | None = None,
          init: str | Path | None = None, max_seqs: int | None = None, fit_minutes: float | None = None) -> Path:
    """Train (or resume) one drafter; exports safetensors + card to `out` at every checkpoint.
    ``stop_at`` pauses at that step (the schedule still runs over ``tc.steps``): several drafters
    can then take turns on one core with the same data and the same number of steps. ``fit_minutes``: a fresh
    run times its steps ``FIT_PROBE`` and sets the schedule's length (at most ``tc.steps``) so that the run
    takes about that long; a resumed one keeps the length it set."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = store or FeatureStore(feat_dir, limit=max_seqs)
    tr, val = store.split()
    ckpt_path = run_dir / "ckpt.pt"
    torch.manual_seed(tc.seed)
    ck = torch.load(ckpt_path, weights_only=True) if ckpt_path.exists() else None
    fit_at = None
    if fit_minutes is not None:
        if ck is not None and "schedule_steps" in ck:
            tc = replace(tc, steps=int(ck["schedule_steps"]))
        elif ck is None:
            fit_at = FIT_PROBE
    src = init if init is not None else out                  # warm start: a given drafter, else the export
    run = start_run(target, algo, tr, val, tc, ck, cfg_overrides, src, log)
    gen = torch.Generator().manual_seed(tc.seed * 7919 + run.step)
    logf = open(run_dir / "log.jsonl", "a")
    t_start, bar = time.perf_counter(), tqdm(total=tc.steps, initial=run.step, desc=f"train {algo}", unit="step")
    run.card = dict(_data_record(tr), recipe=asdict(tc), device=device_name(run.model.W_vd.device))
    if run.warm_start:
        run.card["warm_start"] = run.warm_start
    save = lambda: save_checkpoint(run, target, ckpt_path, out, tc,                    # noqa: E731
                                   run.elapsed + time.perf_counter() - t_start, logf)
    autocast, terms = choose_precision_and_loss(run, target, tc, log)
    end = min(tc.steps, stop_at) if stop_at is not None else tc.steps
    while run.step < end:
        if minutes is not None and time.perf_counter() - t_start > minutes * 60:
            break
        st = train_step(run, tc, gen, terms, autocast)
        if fit_at is not None and run.step in fit_at:
            if run.step == fit_at[0]:
                t_probe = time.perf_counter()
            else:
                per = (time.perf_counter() - t_probe) / (fit_at[1] - fit_at[0])
                tc = replace(tc, steps=fitted_steps(tc, fit_minutes, time.perf_counter() - t_start, per, run.step))
                end, fit_at = min(tc.steps, stop_at) if stop_at is not None else tc.steps, None
                run.card["recipe"] = asdict(tc)
                run.card["fitted_to_minutes"] = fit_minutes
                bar.total = tc.steps
                log(f"{algo}: {per * 1000:.0f} ms a step here: {tc.steps} steps fit {fit_minutes:g} min")
        bar.update(1)
        bar.set_postfix(loss=f"{st['loss']:.3f}", tau=f"{st['tau_est']:.2f}", acc1=f"{st['acc1']:.2f}")
        if run.step % 10 == 0:
            logf.write(json.dumps({"step": run.step, "lr": lr_at(run.step, tc), **st}) + "\n")
            logf.flush()
        if run.step % tc.ckpt_every == 0:
            if store.refresh():                                 # shards written since: new data
                run.tr, run.val = store.split()
                run.card.update(_data_record(run.tr))
            log(f"step {run.step}: val {save()}")
    bar.close()
    if run.step % tc.ckpt_every:
        save()
    logf.close()
    return ckpt_path


def train_in_turns(target, algos: list[str], feat_dir, runs_root, outs: dict, tc: TrainConfig, turn: int = 200,
                   cfg_overrides: dict | None = None, log=print, inits: dict | None = None,
                   max_seqs: int | None = None, store=None) -> None:
    """Round-robin: every drafter trains ``turn`` steps in its turn, on one shared FeatureStore, until
    all reach ``tc.steps``; interrupted at any point, the next call resumes every run where it stopped."""
    store = store or FeatureStore(feat_dir, limit=max_seqs)
    done = {a: False for a in algos}
    stop = turn
    while not all(done.values()):
        for a in algos:
            run_dir = Path(runs_root) / a
            ck = run_dir / "ckpt.pt"
            at = int(torch.load(ck, weights_only=True, mmap=True)["step"]) if ck.exists() else 0   # no full read
            if at >= tc.steps:
                done[a] = True
                continue
            if at >= stop:
                continue
            train(target, a, feat_dir, run_dir, outs[a], tc, cfg_overrides=cfg_overrides, store=store, log=log,
                  stop_at=stop, init=(inits or {}).get(a))
        stop += turn
