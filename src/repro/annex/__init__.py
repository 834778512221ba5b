"""The annex: what leans on the core but is not on the paper's path. The authors' and the audit's
imports, evidence and compare, downstream tasks, export and generate, performance benchmarks.
It imports the core; the core never imports it."""
