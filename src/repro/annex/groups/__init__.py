"""The groups trained beside Table 1 that ask whether the gain is real: tuning, the query
ablation, decay to zero and version 3's recipe; their tables, figures and claims."""
