"""Reading runs: results, seeds and intervals, the paper's claims, figures, status."""
