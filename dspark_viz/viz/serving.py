"""Serving-side pictures: the engine cost model, Algorithm 1's admission path, and the policy sweeps.

Legend: B tokens in one verify forward, SPS(B) engine steps/s, R concurrent requests, r request, j position,
a_{r,j} prefix survival, τ expected committed tokens, Θ = τ·SPS(B) expected throughput, ℓ_r chosen length.
Numbers come from ``dspark_viz.serving`` (profiles, sweeps) and ``dspark_viz.scheduler`` (Schedule).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..cost import SPSProfile
from ..scheduler import Schedule
from .style import ADMIT_COLORS, OKABE_ITO, POLICY_COLORS, series_scale


# -- SPS profiles -----------------------------------------------------------------------------------
def sps_frame(profiles: Sequence[SPSProfile], bmax: int | None = None, within_table: bool = False):
    """(profile, B, sps, step_ms) at every integer B up to bmax (default: the largest table batch, ≤ 512).
    ``within_table``: each profile only up to its own last table batch (no extrapolated points)."""
    import numpy as np
    import pandas as pd

    top = bmax or min(512, max(p.batch[-1] for p in profiles))
    grid = np.unique(np.round(np.geomspace(1, top, 96)).astype(int))          # smooth parts, log-spaced
    edges = [x for p in profiles for b in p.batch for x in (b - 1, b, b + 1)]  # keep staircase corners
    B = np.array(sorted({int(x) for x in [*grid, *edges] if 1 <= x <= top}))
    frames = []
    for p in profiles:
        b = B[B <= p.batch[-1]] if within_table else B
        frames.append(pd.DataFrame({"profile": p.name, "B": b, "sps": np.asarray(p(b), dtype=float),
                                    "step_ms": 1000 * np.asarray(p.step_time(b), dtype=float)}))
    return pd.concat(frames, ignore_index=True)


def profile_source(p: SPSProfile) -> str:
    """"synthetic" for a made-up curve, else "measured" with what it was measured on (device, CPU, dtype)."""
    if p.device == "synthetic":
        return "synthetic"
    what = [str(x) for x in (p.meta.get("cpu") or p.device, p.meta.get("dtype"),
                             f"{p.meta['threads']} threads" if p.meta.get("threads") else None) if x]
    return "measured" + (f" ({', '.join(what)})" if what else "")


def sps_chart(profiles: Sequence[SPSProfile] | SPSProfile, bmax: int | None = None, width: int = 420,
              height: int = 220, panels: bool = False):
    """Engine steps per second vs tokens per forward B (log x), one line per profile.

    ``panels``: one panel per profile, each with its own y scale and titled synthetic or measured (with what
    it was measured on), each drawn over its own table only — a slow measured engine is not squashed under a
    fast synthetic one, and nothing beyond a measurement is drawn as if measured."""
    import altair as alt

    profiles = [profiles] if isinstance(profiles, SPSProfile) else list(profiles)
    names = [p.name for p in profiles]
    if panels:
        df = sps_frame(profiles, bmax, within_table=True)
        pw = max(160, width // max(1, len(profiles)))
        charts = []
        for i, p in enumerate(profiles):
            d = df[df.profile == p.name]
            charts.append(alt.Chart(d).mark_line(strokeWidth=2, interpolate="linear").encode(
                x=alt.X("B:Q", scale=alt.Scale(type="log", base=2), title="tokens per verify forward B (log)"),
                y=alt.Y("sps:Q", title="engine steps / second SPS(B)" if i == 0 else None,
                        scale=alt.Scale(zero=True)),
                color=alt.Color("profile:N", scale=series_scale(names), legend=None),
                tooltip=[alt.Tooltip("profile:N"), alt.Tooltip("B:Q"), alt.Tooltip("sps:Q", format=".1f"),
                         alt.Tooltip("step_ms:Q", format=".2f", title="ms / step")],
            ).properties(width=pw, height=height, title=alt.Title(p.name, subtitle=profile_source(p),
                                                                   fontSize=12)))
        return alt.hconcat(*charts, spacing=14).resolve_scale(y="independent").properties(title=alt.Title(
            "Engine cost model, one panel per profile (own y scale)",
            subtitle="extra verify tokens are free while SPS stays flat; where it falls, every token slows "
                     "every request"))
    df = sps_frame(profiles, bmax)
    return alt.Chart(df).mark_line(strokeWidth=2, interpolate="linear").encode(
        x=alt.X("B:Q", scale=alt.Scale(type="log", base=2), title="tokens per verify forward B (log scale)"),
        y=alt.Y("sps:Q", title="engine steps / second SPS(B)", scale=alt.Scale(zero=True)),
        color=alt.Color("profile:N", scale=series_scale(names), title="profile"),
        tooltip=[alt.Tooltip("profile:N"), alt.Tooltip("B:Q"), alt.Tooltip("sps:Q", format=".1f"),
                 alt.Tooltip("step_ms:Q", format=".2f", title="ms / step")],
    ).properties(width=width, height=height, title=alt.Title(
        "Engine cost model", subtitle="extra verify tokens are free until the hardware saturates, "
                                      "then every token slows every request"))


# -- one schedule ---------------------------------------------------------------------------------------
def _sched_parts(schedule: Schedule | Mapping[str, Any]) -> tuple[list[dict], int | None, dict, list[int]]:
    if isinstance(schedule, Schedule):
        return list(schedule.path), schedule.stop_at, dict(schedule.info), list(schedule.lengths)
    return (list(schedule.get("path") or []), schedule.get("stop_at"), dict(schedule.get("info") or {}),
            list(schedule.get("lengths") or []))


def admission_path_chart(schedule: Schedule | Mapping[str, Any], max_candidates: int | None = 120,
                         tail: int = 15, width: int = 460, mark_best: bool = False):
    """Algorithm 1, step by step: candidates (r, j) sorted by a_{r,j} (bottom), Θ if admitted so far (top),
    the start level Θ0 = R·SPS(R), and the stop point — the first candidate that did not raise Θ.

    ``schedule``: a scheduler.Schedule (explain=True) or a Round.schedule dict (lengths, path, stop_at).
    Drawn: the path up to the stop plus ``tail`` rejected candidates, at most ``max_candidates``.
    ``mark_best``: also mark the highest Θ among the drawn candidates (where a search without the early stop,
    the retrospective one, would end).
    """
    import altair as alt
    import pandas as pd

    path, stop, info, _ = _sched_parts(schedule)
    if not path:
        return alt.Chart(pd.DataFrame({"msg": ["no admission path: this policy does not sort candidates"]})) \
            .mark_text(fontSize=13).encode(text="msg:N").properties(width=width, height=40)
    n_show = len(path) if stop is None else min(len(path), stop + 1 + tail)
    shown = path[: n_show if max_candidates is None else min(n_show, max_candidates)]
    df = pd.DataFrame(shown)
    df["step"] = range(1, len(df) + 1)
    df["cand"] = [f"r{r}·j{j}" for r, j in zip(df.r, df.j)]
    df["state"] = ["admitted" if a else "not admitted" for a in df.admitted]
    df["is_stop"] = [stop is not None and i == stop for i in range(len(df))]
    color = alt.Color("state:N", title=None, scale=alt.Scale(domain=list(ADMIT_COLORS),
                                                             range=list(ADMIT_COLORS.values())))
    x = alt.X("step:Q", title=None, scale=alt.Scale(domain=[0.5, len(df) + 0.5], nice=False),
              axis=alt.Axis(format="d", tickMinStep=1))
    tips = [alt.Tooltip("step:Q", title="#"), alt.Tooltip("cand:N", title="request·position"),
            alt.Tooltip("a:Q", format=".3f", title="survival a_r,j"), alt.Tooltip("B:Q", title="B if admitted"),
            alt.Tooltip("tau:Q", format=".2f", title="τ if admitted"),
            alt.Tooltip("theta:Q", format=",.1f", title="Θ if admitted"), alt.Tooltip("state:N")]
    base = alt.Chart(df).encode(x=x, tooltip=tips)
    theta_y = alt.Y("theta:Q", title="Θ = τ·SPS(B) (tokens/s)", scale=alt.Scale(zero=False))
    top_layers = [base.mark_line(color="#555555", strokeWidth=1.5).encode(y=theta_y),
                  base.mark_point(filled=True, size=45).encode(y=theta_y, color=color)]
    theta0 = info.get("theta0")
    if theta0 is not None:
        t0 = pd.DataFrame({"theta0": [theta0], "label": [f"start: Θ0 = R·SPS(R) = {theta0:,.0f}"]})
        tb = alt.Chart(t0).encode(y=alt.Y("theta0:Q"))
        top_layers += [tb.mark_rule(strokeDash=[4, 3], color="#777777"),
                       tb.mark_text(align="right", x=width - 4, dy=-6, fontSize=10, color="#555555")
                       .encode(text="label:N")]
    if df.is_stop.any():
        sb = base.transform_filter("datum.is_stop")
        top_layers += [sb.mark_point(shape="circle", size=260, strokeWidth=2.5, color=OKABE_ITO["vermillion"],
                                     filled=False).encode(y=theta_y),
                       sb.mark_rule(color=OKABE_ITO["vermillion"], strokeDash=[2, 2]),
                       sb.mark_text(align="right" if stop > 0.6 * len(df) else "left",
                                    dx=-12 if stop > 0.6 * len(df) else 12, dy=-12, fontSize=11, fontWeight="bold",
                                    color=OKABE_ITO["vermillion"], text="stop: Θ did not improve").encode(y=theta_y)]
    if mark_best and len(df):
        best = int(df.theta.idxmax())
        df["is_best"] = [i == best for i in range(len(df))]
        bb = alt.Chart(df).encode(x=x, tooltip=tips).transform_filter("datum.is_best")
        left = best + 1 > 0.6 * len(df)
        top_layers += [bb.mark_point(shape="diamond", size=220, strokeWidth=2.5, color=OKABE_ITO["blue"],
                                     filled=False).encode(y=theta_y),
                       bb.mark_text(align="right" if left else "left", dx=-12 if left else 12, dy=-16, fontSize=11,
                                    fontWeight="bold", color=OKABE_ITO["blue"],
                                    text=f"best Θ on the path (step {best + 1})").encode(y=theta_y)]
    top = alt.layer(*top_layers).properties(width=width, height=170)
    bottom = base.transform_calculate(s0="datum.step - 0.4", s1="datum.step + 0.4").mark_bar(
        stroke="#333333", strokeWidth=0.4).encode(
        x=alt.X("s0:Q", scale=alt.Scale(domain=[0.5, len(df) + 0.5], nice=False),
                title="candidate in sorted order (highest survival first)", axis=alt.Axis(format="d")),
        x2="s1:Q", y=alt.Y("a:Q", title="survival a_r,j", scale=alt.Scale(domain=[0, 1])), y2=alt.datum(0),
        color=color,
    ).properties(width=width, height=110)
    n_adm = sum(bool(p["admitted"]) for p in path)
    more = f" (first {len(df)} shown)" if len(df) < len(path) else ""
    return alt.vconcat(top, bottom, spacing=6).resolve_scale(color="shared").properties(title=alt.Title(
        f"Admission path of Algorithm 1: {n_adm} of {len(path)} candidates admitted{more}",
        subtitle="admit candidates while the expected throughput Θ keeps rising; stop at the first that does not"))


def chosen_lengths_chart(schedule: Schedule | Mapping[str, Any], gamma: int | None = None, width: int = 460,
                         height: int = 160):
    """Bars: verification length ℓ_r chosen for each request r (title: B, τ̂, Θ of the schedule)."""
    import altair as alt
    import pandas as pd

    _, _, _, lengths = _sched_parts(schedule)
    df = pd.DataFrame({"r": range(len(lengths)), "ell": lengths})
    g = gamma or (max(lengths) if lengths else 1)
    sub = ""
    if isinstance(schedule, Schedule):
        sub = (f"B = {schedule.B} verify tokens · expected commits {schedule.tau:.1f} (all requests) · "
               f"Θ = {schedule.theta_best:,.0f} tok/s")
        if schedule.info.get("profile"):
            sub += f" · profile {schedule.info['profile']}"
    R = len(lengths)
    return alt.Chart(df).mark_bar(color=OKABE_ITO["blue"], stroke="#333333", strokeWidth=0.4 if R <= 64 else 0).encode(
        x=alt.X("r:O", title=f"request r (R = {R})",
                axis=alt.Axis(labels=R <= 32, ticks=R <= 32, labelAngle=0)),
        y=alt.Y("ell:Q", title="ℓ_r verified drafts", scale=alt.Scale(domain=[0, g]),
                axis=alt.Axis(values=list(range(0, g + 1)), format="d")),
        tooltip=[alt.Tooltip("r:O", title="request"), alt.Tooltip("ell:Q", title="ℓ")],
    ).properties(width=width, height=height, title=alt.Title(
        f"Chosen verification lengths (mean ℓ = {sum(lengths) / max(1, R):.2f})", subtitle=sub))


# -- policy sweeps (serving.simulate.sweep frames) -----------------------------------------------------------------
def frontier_chart(sweep_df, width: int = 420, height: int = 280, data: str | None = None):
    """Throughput vs per-user speed, one curve per policy, points labelled by R (paper Fig. 7).
    ``data`` names the requests replayed (shown in the title, e.g. "recorded dspark" or "SYNTHETIC …")."""
    import altair as alt

    policies = list(dict.fromkeys(sweep_df.policy))
    base = alt.Chart(sweep_df).encode(
        x=alt.X("per_user:Q", title="per-user speed (tokens/s per request)", scale=alt.Scale(zero=False)),
        y=alt.Y("throughput:Q", title="total throughput (tokens/s)", scale=alt.Scale(zero=False)),
        color=alt.Color("policy:N", scale=series_scale(policies, POLICY_COLORS), title="policy"),
        order=alt.Order("R:Q"),
        tooltip=[alt.Tooltip("policy:N"), alt.Tooltip("R:Q"), alt.Tooltip("throughput:Q", format=",.0f"),
                 alt.Tooltip("per_user:Q", format=",.1f"), alt.Tooltip("mean_budget:Q", format=".2f",
                                                                         title="mean ℓ"),
                 alt.Tooltip("tau:Q", format=".2f", title="τ")],
    )
    lines = base.mark_line(strokeWidth=2).encode(strokeDash=_policy_dash(policies))
    points = base.mark_point(filled=True, size=40).encode(shape=_policy_shape(policies))
    lab = "hardware-aware" if "hardware-aware" in policies else (policies[0] if policies else "")
    labels = base.transform_filter(f"datum.policy == '{_esc(lab)}'") \
        .mark_text(dx=7, dy=-7, fontSize=9, color="#555555").encode(text=alt.Text("R:Q", format="d"),
                                                                       color=alt.value("#555555"))
    return (lines + points + labels).properties(width=width, height=height, title=alt.Title(
        "Throughput–latency frontier" + (f" · {data}" if data else ""),
        subtitle=[f"each point is one concurrency R (numbers on {lab})", "up and right is better — paper Fig. 7"]))


def budget_chart(sweep_df, width: int = 420, height: int = 240, data: str | None = None):
    """Mean verification budget ℓ per request vs concurrency R (log x), per policy (paper Fig. 8);
    ``data`` as in ``frontier_chart``."""
    import altair as alt

    policies = list(dict.fromkeys(sweep_df.policy))
    base = alt.Chart(sweep_df).encode(
        x=alt.X("R:Q", scale=alt.Scale(type="log", base=2), title="concurrent requests R (log scale)",
                axis=alt.Axis(format="d")),
        y=alt.Y("mean_budget:Q", title="mean verified drafts ℓ per request", scale=alt.Scale(zero=True)),
        color=alt.Color("policy:N", scale=series_scale(policies, POLICY_COLORS), title="policy"),
        tooltip=[alt.Tooltip("policy:N"), alt.Tooltip("R:Q"), alt.Tooltip("mean_budget:Q", format=".2f",
                                                                         title="mean ℓ")],
    )
    return (base.mark_line(strokeWidth=2).encode(strokeDash=_policy_dash(policies)) + base.mark_point(
        filled=True, size=40).encode(shape=_policy_shape(policies))).properties(width=width, height=height, title=alt.Title(
            "Verification budget shrinks as the engine fills up" + (f" · {data}" if data else ""),
            subtitle=["fixed policies keep ℓ constant; the hardware-aware scheduler",
                      "spends less at high load — paper Fig. 8"]))


def engine_load_chart(summary, width: int = 420, height: int = 260, cpu: str | None = None):
    """The live engine's measured throughput against R beside plain decoding in the same engine and the
    simulation's prediction (serving/engine_bench.py ``summarize`` rows; log-2 x)."""
    import altair as alt
    import pandas as pd

    rows = []
    for r in summary:
        rows += [{"R": r["R"], "series": "DSpark (measured)", "throughput": r["throughput"]},
                 {"R": r["R"], "series": "plain decoding (measured)", "throughput": r["plain_throughput"]}]
        if r.get("sim_throughput") is not None:
            rows.append({"R": r["R"], "series": "DSpark (simulated)", "throughput": r["sim_throughput"]})
    df = pd.DataFrame(rows)
    series = list(dict.fromkeys(df.series))
    colours = {"DSpark (measured)": OKABE_ITO["vermillion"], "plain decoding (measured)": OKABE_ITO["blue"],
               "DSpark (simulated)": OKABE_ITO["grey"]}
    base = alt.Chart(df).encode(
        x=alt.X("R:Q", scale=alt.Scale(type="log", base=2), title="requests in the engine R (log scale)",
                axis=alt.Axis(format="d", values=sorted({int(r["R"]) for r in summary}))),
        y=alt.Y("throughput:Q", title="committed tokens/s, all requests"),
        color=alt.Color("series:N", scale=alt.Scale(domain=series, range=[colours[s] for s in series]),
                        title=None),
        strokeDash=alt.condition("indexof(datum.series, 'simulated') >= 0", alt.value([5, 3]), alt.value([1, 0])),
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("R:Q"), alt.Tooltip("throughput:Q", format=",.1f")])
    return (base.mark_line(strokeWidth=2) + base.mark_point(filled=True, size=45)).properties(
        width=width, height=height, title=alt.Title(
            "The live engine under load" + (f" · {cpu}" if cpu else ""),
            subtitle=["measured: one engine, R requests at once, one verification forward a round",
                      "dashed: the trace-driven simulation on the engine's profile"]))


def _policy_shape(policies: Sequence[str]):
    """Shape on the policy with the colour's field, title and domain, so the two merge into one legend."""
    import altair as alt

    return alt.Shape("policy:N", title="policy", scale=alt.Scale(domain=list(policies)))


# line dashes of the policies that can run on top of each other (Algorithm 1 and its variants): a dashed curve on a
# solid one stays visible where the two coincide
POLICY_DASH = {"async-global": [7, 4], "hardware-aware+floor": [2, 3], "oracle": [1, 3]}


def _policy_dash(policies: Sequence[str]):
    """Stroke dash on the policy (solid unless POLICY_DASH names one), merged into the colour's legend."""
    import altair as alt

    return alt.StrokeDash("policy:N", title="policy", scale=alt.Scale(
        domain=list(policies), range=[POLICY_DASH.get(p, [1, 0]) for p in policies]))


def _esc(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace("'", "\\'")
