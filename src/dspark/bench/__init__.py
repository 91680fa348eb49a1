"""Measurement: prompt suites, acceptance runs, result files and reports with plots (`dspark bench …`).

Built-in suites read prompts shipped inside PyPI packages (no network); `acceptance` measures τ per suite with the
lossless engine; `results` holds the frozen result records and their JSON files; `report` turns result files into
Markdown + PNG plots. Speed runs (throughput against peers) add rows to the same result schema.
"""
