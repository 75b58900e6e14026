"""The scheduler playground panel: Algorithm 1 on confidence rows, no model (see ``SchedulerPlayground``)."""
from __future__ import annotations

import html
from typing import Sequence

from ... import viz
from ...cost import SPSProfile
from ...scheduler import Schedule
from ..inputs import check_confidences, split_confidences
from ..schedule import knee_profile, playground_requests, playground_schedule
from .panel_kit import panel_bundle, plain
from .panel_kit import profile_dict as _profile_dict
from .panel_kit import show as _show
from .panel_kit import widgets_module as _w


def _fmt_row(row) -> str:
    return ", ".join(f"{c:.3g}" for c in row)


class SchedulerPlayground:
    """Algorithm 1 on recorded confidences, no model: choose load R and a profile, see ℓ per request and
    the admission path. ``early stop`` off shows the retrospective search (argmax Θ, not lossless).

    Request 0 is *yours*: its confidences c_1..c_γ are an editable text field (``set_confidences``); the other
    R − 1 requests tile the given rows. The profile ``KNEE`` is the smooth accelerator with its knee on a slider
    (``set_knee``): where extra verified tokens stop being free."""

    KNEE = "gpu-like, knee on the slider"

    def __init__(self, confidences: Sequence[Sequence[float]], profiles=None, R: int = 8, max_R: int = 256,
                 knee: int = 96):
        W = _w()
        if not confidences:
            raise ValueError("give at least one row of confidences")
        self.confidences = [check_confidences(c) for c in confidences]
        self.profiles = _profile_dict(profiles)
        self.mine = list(self.confidences[0])
        self.load = W.IntSlider(value=int(R), min=1, max=max(int(max_R), int(R)), description="load R",
                                continuous_update=False)
        self.profile = W.Dropdown(options=list(self.profiles) + [self.KNEE], description="SPS profile")
        self.knee = W.IntSlider(value=int(knee), min=4, max=512, step=4, description="SPS knee B",
                                continuous_update=False, tooltip="tokens per forward where the engine saturates")
        self.early_stop = W.Checkbox(value=True, description="early stop (Algorithm 1, lossless)")
        self.conf_text = W.Text(value=_fmt_row(self.mine), description="your c_k", continuous_update=False,
                                layout=W.Layout(width="60%"), tooltip="comma-separated confidences in [0, 1]")
        self.message = W.HTML()
        self.summary = W.HTML()
        self.lengths_out = W.Output()
        self.path_out = W.Output()
        self.widget = W.VBox([W.HBox([self.load, self.profile, self.early_stop]),
                              W.HBox([self.conf_text, self.knee]), self.message, self.summary,
                              self.lengths_out, self.path_out])
        for w in (self.load, self.profile, self.early_stop, self.knee):
            w.observe(lambda _: self.update(), names="value")
        self.conf_text.observe(lambda ch: self._edit(ch["new"]), names="value")
        self.schedule: Schedule | None = None
        self.lengths_chart = self.path_chart = None
        self.update()

    def requests(self) -> list[list[float]]:
        return playground_requests(self.confidences, int(self.load.value), self.mine)

    def current_profile(self) -> SPSProfile:
        if self.profile.value == self.KNEE:
            return knee_profile(self.knee.value)
        return self.profiles[self.profile.value]

    def update(self) -> Schedule:
        prof = self.current_profile()
        conf = self.requests()                                     # (R, γ): yours first
        self.schedule = playground_schedule(self.confidences, len(conf), prof, self.mine, bool(self.early_stop.value))
        s = self.schedule
        gamma = max(len(c) for c in conf)
        self.lengths_chart = viz.chosen_lengths_chart(s, gamma=gamma)
        self.path_chart = viz.admission_path_chart(s)
        _show(self.lengths_out, self.lengths_chart)
        _show(self.path_out, self.path_chart)
        mean = sum(s.lengths) / len(s.lengths)
        self.summary.value = (f"R = {len(conf)} requests · B = {s.B} tokens in the verify forward · "
                              f"your request: ℓ = {s.lengths[0]} · mean ℓ = {mean:.2f} · expected throughput "
                              f"Θ = {s.theta_best:,.0f} tokens/s (start Θ0 = {s.info.get('theta0', float('nan')):,.0f})"
                              f" · profile {html.escape(prof.name)}")
        return s

    def _repr_mimebundle_(self, **kwargs):
        return panel_bundle(self.widget, [self.lengths_chart, self.path_chart],
                            "SchedulerPlayground: " + plain(self.summary.value), **kwargs)

    def _edit(self, text: str) -> None:
        try:
            row = check_confidences(split_confidences(text))
        except ValueError as e:                                   # keep the last good row, say why
            self.message.value = f'<span style="color:#D55E00">{html.escape(str(e))}</span>'
            return
        self.message.value = ""
        if _fmt_row(row) == _fmt_row(self.mine):                  # the field echoes set_confidences: keep its row
            return
        self.mine = row
        self.update()

    def set_confidences(self, row: Sequence[float]) -> Schedule:
        """Your request's c_1..c_γ (each in [0, 1]), at full precision (the field shows 3 digits); re-schedules."""
        self.mine = check_confidences(row)
        self.conf_text.value = _fmt_row(self.mine)                # its observer sees the row is already taken
        return self.update()

    def set_knee(self, knee: int) -> Schedule:
        """Select the adjustable profile with its knee at ``knee`` tokens per forward."""
        knee = int(knee)
        if not self.knee.min <= knee <= self.knee.max:
            raise ValueError(f"the knee must lie in {self.knee.min}…{self.knee.max}, got {knee}")
        self.knee.value = knee
        if self.profile.value != self.KNEE:
            self.profile.value = self.KNEE
        return self.update()

    def set_load(self, R: int) -> Schedule:
        R = int(R)
        if R > self.load.max:
            self.load.max = R
        if self.load.value == R:
            return self.update()
        self.load.value = R                                       # the observer re-runs update()
        return self.schedule

    def set_profile(self, name: str) -> Schedule:
        if name not in self.profiles and name != self.KNEE:
            raise ValueError(f"unknown profile {name!r}; have {', '.join(self.profiles)}, {self.KNEE}")
        if self.profile.value == name:
            return self.update()
        self.profile.value = name
        return self.schedule

    @property
    def lengths(self) -> list[int]:
        return list(self.schedule.lengths)


__all__ = ["SchedulerPlayground"]
