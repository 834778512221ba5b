"""Loss logs in the audit's format (its neurreps_writeup/logs/ CSVs: `step,train_loss,val_loss`,
one row per evaluation, losses to 4 decimals), written here at any length, for the import,
evidence, notebook and workflow tests."""


def write_log(path, rows, header="step,train_loss,val_loss"):
    """A loss log as the audit writes it: its header, then `step,train,val` with 4 decimals."""
    lines = [header] + [
        ",".join(v if isinstance(v, str) else f"{v:.4f}" if i else str(v) for i, v in enumerate(r))
        for r in rows
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def curve(last_step, interval=1000, start=11.1, end=2.55, spike_at=None):
    """Rows of a falling loss curve every `interval` steps; from spike_at on, 7.2 (a divergence)."""
    n = last_step // interval
    rows = []
    for k in range(n + 1):
        val = start + (end - start) * (k / max(n, 1)) ** 0.3
        if spike_at is not None and k * interval >= spike_at:
            val = 7.2
        rows.append((k * interval, val - 0.001, val))
    return rows
