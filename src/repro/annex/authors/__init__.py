"""The authors' artefacts: their configurations' runs and their checkpoints."""
