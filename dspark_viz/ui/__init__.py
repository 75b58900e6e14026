"""The faces' logic, no algorithms: ipywidgets panels (``widgets``) and the Gradio app's tabs as plain functions.

App modules: ``resources`` (what the app loads once and shares), ``inputs`` (checking user input), ``text``
(Markdown and chart JSON helpers), and one module per tab: ``live``, ``playground``, ``calibration_tab``,
``frontier``, ``replay``. ``app.py`` at the repository root maps them onto Gradio components.
"""
