"""Downstream tasks through lm-evaluation-harness (docs/downstream.md): does a lower loss carry
over to HellaSwag, LAMBADA, ...? `repro downstream` scores one checkpoint, ours or the authors';
the workflow's results/downstream.csv compares the Table 1 configurations.

  model.py    the lm-eval model class ("repro") wrapping our GPT and the GPT-2 encoding
  tasks.py    running lm-eval's tasks on it; its result JSON, per-item scores, one line per task
  compare.py  the configurations side by side: each one's score and its paired difference from
              the baseline (a bootstrap over the items both answered)

Needs the `downstream` extra (pip install -e '.[downstream]'); nothing else in repro imports it.
"""
