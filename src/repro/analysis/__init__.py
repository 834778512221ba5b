"""Reading runs: results, seeds and intervals, figures, status."""
