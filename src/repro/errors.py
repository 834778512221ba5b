"""The package's one error type: what the command line prints as one line."""

# A message quotes values from its input (jsonschema quotes the whole value it refuses): beyond this
# length its middle is cut, so that the file and key at its start and the reason at its end stay.
MAX_MESSAGE = 1000


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text`, its middle replaced by a count of what was cut when it is longer than `limit`."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]} [... {len(text) - head - tail:,} characters ...] {text[-tail:]}"


def printable(text) -> str:
    """`text` with what a terminal would act on (escapes, newlines) written as Python escapes: a
    name from a file or folder, shown in a line, never clears a screen or splits the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


class ReproError(ValueError):
    """An input the package cannot use; the message is one line naming the file, field or value,
    at most about MAX_MESSAGE characters however long the values it quotes."""

    def __str__(self) -> str:
        return shorten(super().__str__())
