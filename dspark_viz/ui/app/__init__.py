"""The Gradio app's tabs as plain functions (no Gradio import here): ``app.py`` at the repository root maps them
onto components. ``resources`` is what the app loads once and shares; ``text`` writes Markdown and chart JSON."""
