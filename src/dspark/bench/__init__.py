"""Measurement: prompt suites, acceptance runs, result files and reports with plots (`dspark bench …`).

Built-in suites read prompts shipped inside PyPI packages (no network); `acceptance` measures τ per suite with the
lossless engine; `results` holds the frozen result records and their JSON files; `report` turns result files into
Markdown + PNG plots. Speed runs (`throughput`: our engine and its peers, `our_engine` / `peers`, at batch 1 and
higher concurrency) add rows to the same result schema; `round_profile` splits a decoding round's time.
"""
