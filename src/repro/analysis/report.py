"""Tables as HTML for Snakemake's report (docs/report.md): each notebook that writes a table as
CSV writes it as an HTML table beside it, which the report shows on its page (a CSV would only
be a download link there).

The file is a fragment (a style block and a table), so that it reads both on its own and inside
the report's page; ASCII only, non-ASCII characters as entities, whatever charset it is served
with.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pandas.io.formats.style import Styler

STYLE = """<style>
table.repro-table {border-collapse: collapse; font: 13px/1.4 sans-serif; margin: 0.5em 0;}
table.repro-table th, table.repro-table td {border: 1px solid #ccc; padding: 3px 8px;
  text-align: right; vertical-align: top;}
table.repro-table th {background: #f0f0f0;}
table.repro-table td:first-child, table.repro-table th:first-child {text-align: left;}
table.repro-table tbody tr:nth-child(even) {background: #fafafa;}
</style>"""


def table_html(table: pd.DataFrame | Styler) -> str:
    """A table (a DataFrame, or a Styler that formats one) as an HTML fragment without its
    index; missing values empty."""
    if isinstance(table, Styler):
        body = table.hide(axis="index").set_table_attributes('class="repro-table"').to_html()
    else:
        body = table.to_html(index=False, na_rep="", classes="repro-table", border=0)
    html = f"{STYLE}\n{body}\n"
    return html.encode("ascii", "xmlcharrefreplace").decode("ascii")


def write_table_html(table: pd.DataFrame | Styler, path: str | Path) -> Path:
    """Write table_html(table) to path (its folder created); the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table_html(table))
    return path
