"""benchmarks/record.py: a benchmark's figures as a section of a page of benchmarks/results/,
headed by date, machine, command and load; the same command's section replaced, the page written
whole and never through a link."""

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO

BENCHMARKS = REPO / "benchmarks"


@pytest.fixture(scope="module")
def record():
    spec = importlib.util.spec_from_file_location("record", BENCHMARKS / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_section_is_headed_by_date_machine_command_and_load(record, tmp_path):
    path = record.write(
        "topic", "A topic", record.section("bench --x", "1.0 s", "1.0", "2.0"), tmp_path
    )
    text = path.read_text()
    assert text.startswith("# A topic\n\n## `bench --x`\n")
    for field in ("- date: ", " UTC", "- machine: ", "cores", "- command: `bench --x`", "- load"):
        assert field in text, field
    assert "1.0 at the start, 2.0 at the end" in text and text.endswith("1.0 s\n")


def test_recording_a_command_again_replaces_its_section_only(record, tmp_path):
    record.write("topic", "A topic", record.section("bench --a", "first", "1", "1"), tmp_path)
    record.write("topic", "A topic", record.section("bench --b", "other", "1", "1"), tmp_path)
    path = record.write(
        "topic", "Ignored", record.section("bench --a", "second", "1", "1"), tmp_path
    )
    text = path.read_text()
    assert text.count("## `bench --a`") == 1 and "first" not in text and "second" in text
    assert "other" in text and text.startswith("# A topic\n")
    assert text.index("bench --b") < text.index("second")  # the latest last


def test_a_page_that_is_a_link_is_replaced_not_written_through(record, tmp_path):
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("kept\n")
    (tmp_path / "topic.md").symlink_to(elsewhere)
    (tmp_path / "topic.md.partial").symlink_to(elsewhere)
    path = record.write("topic", "A topic", record.section("c", "b", "1", "1"), tmp_path)
    assert elsewhere.read_text() == "kept\n"
    assert not path.is_symlink() and "## `c`" in path.read_text()
    assert not (tmp_path / "topic.md.partial").exists()


def test_recording_keeps_what_is_printed_and_writes_it(record, tmp_path, capsys, monkeypatch):
    script = BENCHMARKS / "bench_startup.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--n", "2", "--record"])
    with record.recording("topic", "A topic", enabled=True, results=tmp_path):
        print("3.5 s")
    assert "3.5 s" in capsys.readouterr().out
    text = (tmp_path / "topic.md").read_text()
    assert "## `python benchmarks/bench_startup.py --n 2`" in text and "```\n3.5 s\n```" in text
    with record.recording("other", "Other", enabled=False, results=tmp_path):
        print("not kept")
    assert not (tmp_path / "other.md").exists()


def test_the_shell_scripts_record_what_they_print_through_the_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "record.py"), "dag-x", "--title", "T"]
        + ["--command", "benchmarks/time_smoke_dag.sh 2", "--load-start", "0.5 / 0.4 / 0.3"]
        + ["--results", str(tmp_path)],
        input="main at smoke: 10 s wall\n",
        capture_output=True,
        text=True,
        check=True,
    )
    text = (tmp_path / "dag-x.md").read_text()
    assert "recorded in" in done.stdout
    assert (
        "- command: `benchmarks/time_smoke_dag.sh 2`" in text and "0.5 / 0.4 / 0.3 at the" in text
    )
    assert "main at smoke: 10 s wall" in text


@pytest.mark.parametrize(
    "script",
    [
        "bench_allocator.py",
        "bench_cli_start.py",
        "bench_metrics_read.py",
        "bench_startup.py",
        "bench_tokenize.py",
        "time_smoke_dag.sh",
        "compare_smoke_dag.sh",
    ],
)
def test_every_benchmark_script_offers_to_record(script):
    text = (BENCHMARKS / script).read_text()
    assert "--record" in text or "record.add_argument" in text
    assert "record.py" in text or "record.recording(" in text
