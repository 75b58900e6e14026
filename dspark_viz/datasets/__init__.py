"""The data the package reads and writes: prompt files, recorded trace bundles, and synthetic traces.

- ``prompts``    JSONL prompt files (``{"turns": [...], "domain"?: ...}`` a line), the shipped suites;
- ``traces``     many Traces in one compact ``.json.gz`` bundle: the shipped recordings the course and app replay;
- ``synthetic``  made-up rounds with a known acceptance law, for the serving notebooks and tests;
"""
