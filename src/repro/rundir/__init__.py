"""A run directory: run.json (record.py: what was run, on what, how it ended), metrics.csv and
train.log (metrics.py: one row a step, one line a log interval), the files training writes and
the results read back."""

from repro.rundir.metrics import (  # noqa: F401
    METRICS_BYTES,
    METRICS_COLUMNS,
    MetricsLog,
    Progress,
    check_resume,
    checked_rows,
    duration,
    metrics_text,
    read_rows,
    rows_before,
    tail_rows,
    write_metrics,
)
from repro.rundir.record import (  # noqa: F401
    CHECKPOINT,
    FINISHED,
    LIVE,
    METRICS_CSV,
    RECORD_FORMAT,
    RUN_JSON,
    RunError,
    RunRecord,
    code_version,
    files_dir,
    has_run,
    identity_differences,
    publish,
    read_record,
)
