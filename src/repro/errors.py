"""The package's one error type: what the command line prints as one line."""


class ReproError(ValueError):
    """An input the package cannot use; the message is one line naming the file, field or value.

    The command line prints it as `repro: error: ...`; every module's own error derives from it."""
