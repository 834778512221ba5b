"""Downstream tasks through lm-evaluation-harness (docs/downstream.md). Needs the `downstream`
extra; nothing else in repro imports it."""
