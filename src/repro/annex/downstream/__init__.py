"""Downstream tasks through lm-evaluation-harness (docs/downstream.md): the `downstream` extra."""
