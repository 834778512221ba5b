"""Downstream tasks through lm-evaluation-harness (docs/annex/downstream.md): the `downstream` extra."""
