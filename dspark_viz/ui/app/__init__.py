"""The Gradio app's tabs. The tab modules (``live``, ``playground``, ``calibration_tab``, ``frontier``,
``replay``) are plain functions with no Gradio import; each ``tab_*`` module is one tab's builder, its layout and
callbacks mapping those results onto Gradio components (``components`` holds what they share); ``app.py`` at the
repository root composes the builders. ``resources`` is what the app loads once and shares; ``text`` writes
Markdown and chart JSON."""
