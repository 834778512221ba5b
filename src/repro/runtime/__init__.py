"""How and where a run runs: device and precision, GPUs, processes, locks, signals, progress."""
