"""The interactive faces' logic, no algorithms, one subpackage per toolkit:

- ``app/``       the Gradio app's tabs as plain functions (``app.py`` at the repository root maps them onto Gradio
                 components): ``resources`` (what the app loads once and shares), ``text`` (Markdown and chart
                 JSON), and one module per tab: ``live``, ``playground``, ``calibration_tab``, ``frontier``,
                 ``replay``;
- ``notebook/``  the ipywidgets panels: ``widgets`` (a live decoder, a calibration explorer), ``scheduler_panel``
                 (the scheduler playground), ``panel_kit`` (what they share).

What both toolkits share sits here: ``inputs`` (checking what a user typed, the one confidence parser) and
``schedule`` (the playground's requests, knee profile and schedule). Both take their live-decode policy from
``background.live_policy``.
"""
