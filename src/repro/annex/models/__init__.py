"""A run as a model others load: a transformers folder with its card (export, hub), the checks
of a model folder before anything is allocated (folder), and text from a checkpoint (generate)."""
