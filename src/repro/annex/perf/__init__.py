"""Cost and speed: FLOPs and parameters, training and inference benchmarks."""
