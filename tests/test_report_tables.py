"""Tables as HTML for the report's page (repro.analysis.report)."""

import pandas as pd

from repro.analysis import report


def test_table_html_says_constant_columns_once_and_leaves_missing_values_empty(tmp_path):
    table = pd.DataFrame(
        {
            "experiment": ["baseline", "résgelu"],
            "holds": [None, True],
            "rel_improvement": [0.0, 0.0123],
            "caveat": ["preset tiny <not the paper>", "preset tiny <not the paper>"],
        }
    )
    html = report.write_table_html(
        table, tmp_path / "t.html", {"rel_improvement": "{:.2%}"}
    ).read_text()
    assert html.isascii() and "r&#233;sgelu" in html  # whatever charset it is served with
    assert "<td>1.23%</td>" in html and "None" not in html and "nan" not in html
    assert "<b>caveat</b>: preset tiny &lt;not the paper&gt;" in html
    assert "<th>caveat</th>" not in html  # said once above, not in every row
