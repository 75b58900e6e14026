"""ipywidgets panels over the library: a live decoder, a scheduler playground, a calibration explorer.

No math lives here: decoding is ``decode.generate_rounds``, scheduling ``scheduler.HardwareAware``,
calibration ``calibration.fit_sts`` / ``calibration_report``, pictures ``dspark_viz.viz``, engine load
``background.live_policy``. ipywidgets is imported lazily (only when a panel is built).

Every panel displays as its widget (``.widget``, the root container) with a static PNG of its charts and a line of
text beside it, for readers without a kernel (``panel_kit.panel_bundle``), and exposes plain methods (``step``, ``run``,
``set_load``, ``set_profile``, ``set_sts``, ``set_position``) that work without a display, so notebooks,
tests and scripts drive them the same way. Charts are shown through an Output widget holding the
Vega-Lite v5 mime bundle (``viz.mime_bundle``), which JupyterLab renders offline; the last chart of each
view is also kept as an attribute (``round_chart``, ``lengths_chart``, ``chart`` …).

Engine load in the decode panel: the panel serves one request, so for R > 1 its policy is
``LoadedPolicy``, which adds R − 1 background requests replaying ``background`` (recorded c_k rows; a small
synthetic set by default). The Schedule kept in each Round shows the whole batch's admission path.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

from ... import calibration as cal
from ... import metrics, viz
from ...background import SYNTHETIC_BACKGROUND, LoadedPolicy, live_policy
from ...decode import generate_rounds
from .panel_kit import panel_bundle, plain
from .panel_kit import profile_dict as _profile_dict
from .panel_kit import show as _show
from .panel_kit import widgets_module as _w
from .scheduler_panel import SchedulerPlayground


# -- live decoding ---------------------------------------------------------------------------------------
class DecodePanel:
    """Prompt → speculative decoding one round at a time: the token strip and the round view update
    after every round. Changing prompt, drafter or temperature starts a new request; load R and the
    profile apply from the next round on."""

    def __init__(self, target, drafters: Mapping[str, Any], profiles=None, *, prompt: str = "",
                 calibrations: Mapping[str, Any] | None = None, background=None, max_new_tokens: int = 64,
                 seed: int = 0, temperature: float = 0.0, max_load: int = 256):
        W = _w()
        if not drafters:
            raise ValueError("give at least one drafter")
        self.target, self.drafters = target, dict(drafters)
        self.profiles = _profile_dict(profiles)
        self.calibrations = dict(calibrations or {})
        self.background = [list(c) for c in (background or SYNTHETIC_BACKGROUND)]
        self.max_new_tokens, self.seed = int(max_new_tokens), int(seed)

        self.prompt = W.Textarea(value=prompt, description="prompt", layout=W.Layout(width="100%", height="70px"))
        self.drafter = W.Dropdown(options=list(self.drafters), description="drafter")
        self.temperature = W.FloatSlider(value=float(temperature), min=0.0, max=2.0, step=0.1,
                                         description="temperature", readout_format=".1f")
        self.load = W.IntSlider(value=1, min=1, max=int(max_load), description="load R",
                                tooltip="concurrent requests sharing the verify budget")
        self.profile = W.Dropdown(options=list(self.profiles), description="SPS profile")
        self.step_button = W.Button(description="Step", icon="step-forward", tooltip="one draft → verify round")
        self.run_button = W.Button(description="Run", icon="play", button_style="primary",
                                   tooltip="decode to the end")
        self.reset_button = W.Button(description="Reset", icon="refresh")
        self.status = W.HTML()
        self.strip = W.HTML()
        self.round_out = W.Output()
        self.schedule_out = W.Output()
        self.widget = W.VBox([
            self.prompt,
            W.HBox([self.drafter, self.temperature]),
            W.HBox([self.load, self.profile]),
            W.HBox([self.step_button, self.run_button, self.reset_button]),
            self.status, self.strip,
            W.Tab(children=[self.round_out, self.schedule_out], titles=("round view", "admission path")),
        ])
        self.step_button.on_click(lambda _: self.step())
        self.run_button.on_click(lambda _: self.run())
        self.reset_button.on_click(lambda _: self.reset())
        for w in (self.prompt, self.drafter, self.temperature):
            w.observe(lambda _: self.reset(), names="value")
        self.load.observe(lambda ch: self._apply_load(), names="value")
        self.profile.observe(lambda ch: self._apply_profile(), names="value")
        self.round_chart = self.schedule_chart = None
        self.reset()

    # -- state ----------------------------------------------------------------------------------------
    @property
    def trace(self):
        return self._rounds.trace if self._rounds is not None else None

    def reset(self) -> None:
        """Forget the current request (the next step starts a new one with the current settings)."""
        self._rounds, self._iter, self.done, self.policy = None, None, False, None
        self.round_chart = self.schedule_chart = None
        self.round_out.outputs = ()
        self.schedule_out.outputs = ()
        self.strip.value = ""
        self.status.value = "<i>Press Step or Run to decode.</i>"

    def _start(self) -> None:
        name = self.drafter.value
        d = self.drafters[name]
        self.policy = live_policy(d, self.load.value, self.background)   # no head: FixedLength(γ)
        self._rounds = generate_rounds(
            self.target, d, self.prompt.value, policy=self.policy, temperature=float(self.temperature.value),
            max_new_tokens=self.max_new_tokens, seed=self.seed, calibration=self.calibrations.get(name),
            sps=self.profiles[self.profile.value], meta={"panel_load": self.load.value})
        self._iter = iter(self._rounds)

    def _apply_load(self) -> None:
        if isinstance(self.policy, LoadedPolicy):
            self.policy.R = int(self.load.value)
        self._render_status()

    def _apply_profile(self) -> None:
        if self._rounds is not None:
            self._rounds.sps = self.profiles[self.profile.value]
        self._render_status()

    # -- actions --------------------------------------------------------------------------------------
    def step(self):
        """Decode one round; returns the new Round (None when the request has finished)."""
        if self.done:
            return None
        try:
            if self._iter is None:
                self._start()
            r = next(self._iter)
        except StopIteration:
            self.done = True
            self._render_status()
            return None
        except ValueError as e:                                  # bad prompt / settings: show, don't crash
            self.done = True
            self.status.value = f'<span style="color:#D55E00">{html.escape(str(e))}</span>'
            return None
        self._render()
        return r

    def run(self, max_rounds: int | None = None) -> int:
        """Step until the request ends (or ``max_rounds`` rounds); returns the number of rounds decoded."""
        n = 0
        while max_rounds is None or n < max_rounds:
            if self.step() is None:
                break
            n += 1
        return n

    def _repr_mimebundle_(self, **kwargs):
        return panel_bundle(self.widget, [self.round_chart, self.schedule_chart],
                            "DecodePanel: " + (plain(self.status.value) or "not started"), **kwargs)

    # -- drawing --------------------------------------------------------------------------------------
    def _render(self) -> None:
        tr = self.trace
        self.strip.value = viz.token_strip_html(tr, max_rounds=200)
        self.round_chart = viz.round_view(tr, -1)
        _show(self.round_out, self.round_chart)
        sched = tr.rounds[-1].schedule
        if sched and sched.get("path"):
            self.schedule_chart = viz.admission_path_chart(sched)
            _show(self.schedule_out, self.schedule_chart)
        self._render_status()

    def _render_status(self) -> None:
        tr = self.trace
        if tr is None:
            return
        pol = getattr(self.policy, "name", "?")
        done = " · <b>finished</b>" if self.done else ""
        self.status.value = (f"{len(tr.rounds)} rounds · {tr.n_generated} tokens · τ = {metrics.tau(tr):.2f} · "
                             f"policy {html.escape(pol)} · profile {html.escape(self.profile.value)}{done}")


# -- calibration explorer -------------------------------------------------------------------------------------
class CalibrationExplorer:
    """Reliability of the prefix survival a_k per position, with Sequential Temperature Scaling on or off.

    conf (N, γ) raw c_k, accepted (N,) m, ell (N,) ℓ or None (all verified), calib an STSCalibration
    (None: fitted here on the same rows, in-sample — say so when teaching).
    """

    def __init__(self, conf, accepted, ell=None, calib=None, n_bins: int = 10):
        W = _w()
        self.in_sample = calib is None
        self.calib = calib if calib is not None else cal.fit_sts(conf, accepted, ell)
        self.frame = viz.reliability_frame(conf, accepted, ell, self.calib, n_bins=n_bins)
        self.report = cal.calibration_report(conf, accepted, ell, self.calib)
        self.gamma = len(self.report["n"])
        self.sts = W.ToggleButton(value=True, description="STS on", icon="thermometer-half",
                                  tooltip="show calibrated survival a'_k next to the raw a_k")
        self.position = W.Dropdown(options=[("all", 0)] + [(f"k = {k}", k) for k in range(1, self.gamma + 1)],
                                   value=0, description="position")
        self.table = W.HTML()
        self.out = W.Output()
        self.widget = W.VBox([W.HBox([self.sts, self.position]), self.out, self.table])
        self.sts.observe(lambda _: self.update(), names="value")
        self.position.observe(lambda _: self.update(), names="value")
        self.chart = None
        self.update()

    def update(self):
        on = bool(self.sts.value)
        self.sts.description = "STS on" if on else "STS off"
        df = self.frame if on else self.frame[self.frame.stage == "before STS"]
        k = int(self.position.value)
        self.chart = viz.reliability_diagram(df, positions=[k] if k else None, report=self.report,
                                         size=300 if k else 150)
        _show(self.out, self.chart)
        self.table.value = self._table(on)
        return self.chart

    def _repr_mimebundle_(self, **kwargs):
        k = int(self.position.value)
        return panel_bundle(self.widget, [self.chart], f"CalibrationExplorer: STS {'on' if self.sts.value else 'off'}"
                            f", {'position ' + str(k) if k else 'every position'}, {sum(self.report['n'][:1])} rounds",
                            **kwargs)

    def set_sts(self, on: bool):
        if self.sts.value == bool(on):
            return self.update()
        self.sts.value = bool(on)
        return self.chart

    def set_position(self, k: int | None):
        k = int(k or 0)
        if not 0 <= k <= self.gamma:
            raise ValueError(f"position must be 1..{self.gamma} (or None for all), got {k}")
        if self.position.value == k:
            return self.update()
        self.position.value = k
        return self.chart

    def _table(self, on: bool) -> str:
        rep, f = self.report, (lambda x: "—" if x != x else f"{x:.3f}")
        head = ["k", "rounds", "observed P(m≥k)", "mean a_k", "ECE raw", "AUROC"]
        if on:
            head[4:4] = ["T_k", "mean a'_k", "ECE STS"]
        rows = []
        for i in range(self.gamma):
            cells = [str(i + 1), str(rep["n"][i]), f(rep["rate"][i]), f(rep["mean_before"][i]),
                     f(rep["ece_before"][i]), f(rep["auroc"][i])]
            if on:
                cells[4:4] = [f"{rep['temperatures'][i]:.2f}", f(rep["mean_after"][i]), f(rep["ece_after"][i])]
            rows.append("<tr>" + "".join(f'<td style="padding:1px 8px;text-align:right">{c}</td>' for c in cells)
                        + "</tr>")
        th = "".join(f'<th style="padding:1px 8px;text-align:right">{html.escape(h)}</th>' for h in head)
        note = " (STS fitted on these same rounds: in-sample)" if self.in_sample and on else ""
        return (f'<table style="border-collapse:collapse;font-size:12px"><tr>{th}</tr>{"".join(rows)}</table>'
                f'<div style="font-size:11px;color:#666">ECE and AUROC from calibration.calibration_report{note}</div>')


__all__ = ["DecodePanel", "SchedulerPlayground", "CalibrationExplorer"]
