"""Training: one run of one configuration, from its run directory to its last checkpoint."""
