"""A benchmark's figures as a section of a page of benchmarks/results/, headed by when (UTC), on
what machine (CPU model and core count), by which command and under what load they were measured.

A page is a topic (benchmarks/results/allocator.md); each section is one command's latest
measurement: recording a command again replaces its section, another command's is appended. The
page is written whole to a `.partial` file, then renamed over the old one, never through a link.

From Python, around what the benchmark prints:

    with record.recording("allocator", "CPU training's allocator", enabled=args.record):
        ...

From a shell script, what it printed on standard input:

    ... | python3 benchmarks/record.py smoke-dag --title "The smoke DAG" --command "$*" \\
              --load-start "$load"
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import re
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> str:
    """The CPU's model (/proc/cpuinfo's model name, else the platform's) and its core count."""
    model = ""
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = found.group(1).strip() if found else ""
    model = model or platform.processor() or platform.machine()
    return f"{model}, {os.cpu_count()} cores ({platform.system()} {platform.release()})"


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def section(command: str, body: str, load_start: str, load_end: str, when=None) -> str:
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return "\n".join(
        [
            f"## `{command}`",
            "",
            f"- date: {when:%Y-%m-%d %H:%M} UTC",
            f"- machine: {machine()}",
            f"- command: `{command}`",
            f"- load average (1 / 5 / 15 min): {load_start} at the start, {load_end} at the end",
            "",
            body.rstrip(),
            "",
        ]
    )


def write(topic: str, title: str, new_section: str, results: Path = RESULTS) -> Path:
    """Put `new_section` into the topic's page of benchmarks/results/, in place of the section of
    the same command if there is one; the page's title and the other sections stay."""
    target = results / f"{topic}.md"
    text = target.read_text() if target.is_file() and not target.is_symlink() else ""
    head, *sections = re.split(r"(?m)^(?=## )", text) if text else [f"# {title}\n\n"]
    heading = new_section.split("\n", 1)[0]
    sections = [s for s in sections if s.split("\n", 1)[0] != heading]
    page = head.rstrip() + "\n\n" + "\n".join(s.rstrip() + "\n" for s in [*sections, new_section])
    results.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)  # a stale one, or a link: never written through
    partial.write_text(page)
    partial.replace(target)
    return target


def command_line(argv: list[str] | None = None) -> str:
    """The command as a user at the repository root types it."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(RESULTS.parents[1])
    words = [str(script)] + [a for a in argv[1:] if a != "--record"]
    prefix = ["python"] if script.suffix == ".py" else []
    return shlex.join(prefix + words)


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


@contextlib.contextmanager
def recording(topic: str, title: str, enabled: bool = True, results: Path = RESULTS):
    """Print as usual; where enabled, also write what was printed into the topic's page."""
    if not enabled:
        yield
        return
    start, printed = load(), io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, printed)):
        yield
    body = f"```\n{printed.getvalue().rstrip()}\n```"
    path = write(topic, title, section(command_line(), body, start, load()), results)
    print(f"recorded in {path}")


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record", action="store_true", help="also write the figures into benchmarks/results/"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Record standard input as a results section.")
    parser.add_argument("topic", help="the page: TOPIC.md in benchmarks/results/")
    parser.add_argument("--title", required=True, help="the page's title, for a new page")
    parser.add_argument("--command", required=True, help="the command that measured")
    parser.add_argument("--load-start", default="", help="the load average at its start")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    body = f"```\n{sys.stdin.read().rstrip()}\n```"
    new = section(args.command, body, args.load_start or "not taken", load())
    print(f"recorded in {write(args.topic, args.title, new, args.results)}")


if __name__ == "__main__":
    main()
