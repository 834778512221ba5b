"""Tables and figures as files for Snakemake's report (docs/report.md): a table also as HTML (the
report only links a CSV), a fragment in ASCII so that it reads alone or in the page whatever its
charset; a figure as PNG, PDF or HTML holding the PNG.
"""

from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

import pandas as pd

from repro.files import atomic_write, make_dir

STYLE = """<style>
table.repro-table {border-collapse: collapse; font: 13px/1.4 sans-serif; margin: 0.5em 0;}
table.repro-table th, table.repro-table td {border: 1px solid #ccc; padding: 3px 8px;
  text-align: left; vertical-align: top;}
table.repro-table th {background: #f0f0f0;}
table.repro-table tbody tr:nth-child(even) {background: #fafafa;}
</style>"""


def table_html(table: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    """A table as an HTML fragment, `formats` applied. To fit a report page beside its menu, an
    empty column is left out and one of one value is said once above the table."""
    table = table.copy()
    for column, fmt in (formats or {}).items():
        table[column] = table[column].map(lambda v: "" if pd.isna(v) else fmt.format(v))
    table = table.astype(object).where(table.notna(), "")
    empty = [c for c in table.columns if (table[c] == "").all()]
    constant = [
        c for c in table.columns if len(table) > 1 and table[c].nunique() == 1 and c not in empty
    ]
    notes = "; ".join(f"<b>{escape(str(c))}</b>: {escape(str(table[c].iloc[0]))}" for c in constant)
    notes = f'<p class="repro-note">{notes}</p>\n' if notes else ""
    body = table.drop(columns=empty + constant).to_html(
        index=False, classes="repro-table", border=0
    )
    head, rows = body.split("</thead>", 1)
    html = f"{STYLE}\n{notes}{head.replace('_', '_<wbr>')}</thead>{rows}\n"
    return html.encode("ascii", "xmlcharrefreplace").decode("ascii")


def write_table_html(
    table: pd.DataFrame, path: str | Path, formats: dict[str, str] | None = None
) -> Path:
    path = Path(path)
    make_dir(path.parent)
    with atomic_write(path) as f:
        f.write(table_html(table, formats))
    return path


def save_figure(fig, *paths: str | Path) -> list[Path]:
    """Save a figure to each path by its suffix (.png, .pdf; .html: the PNG in an <img> tag)."""
    saved = []
    for path in map(Path, paths):
        make_dir(path.parent)
        if path.suffix == ".html":
            png = io.BytesIO()
            fig.savefig(png, format="png", bbox_inches="tight")
            data = base64.b64encode(png.getvalue()).decode("ascii")
            with atomic_write(path) as f:
                f.write(f'<img src="data:image/png;base64,{data}" style="max-width: 100%">\n')
        else:
            with atomic_write(path, "wb") as f:
                fig.savefig(f, format=path.suffix[1:].lower(), bbox_inches="tight")
        saved.append(path)
    return saved
