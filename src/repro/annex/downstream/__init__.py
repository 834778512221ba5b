"""Downstream tasks through lm-evaluation-harness (docs/annex/downstream.md): extra `downstream`."""
