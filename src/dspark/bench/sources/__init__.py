"""Readers for benchmark prompts shipped inside PyPI packages (one module per source) and for user JSONL files.

Each reader returns `BenchPrompt`s; it does not select, tokenise or run anything.
"""
