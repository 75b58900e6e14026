"""The ipywidgets panels for the notebooks: ``widgets`` (a live decoder, a calibration explorer, and the scheduler
playground from ``scheduler_panel``); ipywidgets is imported only when a panel is built (``panel_kit``)."""
