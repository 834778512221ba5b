"""Tables as HTML for the report's page (repro.analysis.report)."""

import re

import pandas as pd

from repro.analysis import report, results


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


def test_table1_on_the_page_has_no_empty_column_and_says_constant_ones_once(tiny_runs, write_run):
    equal_rate = "baseline-wd3.125e-2-lr3e-3"  # tiny's Table 1 has it (report.equal_rate)
    write_run(tiny_runs / equal_rate, equal_rate, {0: 10.0, 4: 7.7, 8: 5.9, 12: 4.94}, last_step=12)
    table = results.table1(tiny_runs, "tiny")
    assert (table["config_differences"].fillna("") == "").all()  # as the runs recorded them
    html = report.table_html(results.table_frame(table))
    head, body = html.split("</thead>")
    headers = [h.replace("<wbr>", "") for h in re.findall(r"<th>(.*?)</th>", head)]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    cells = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in rows]
    assert len(rows) == 6 and all(len(row) == len(headers) for row in cells)
    for i, header in enumerate(headers):  # every column shown says something in some row
        assert any(row[i] for row in cells), header
    assert "config_differences" not in html
    # The columns with one value in every row, said once above the table, not in a column.
    note = html.split('<p class="repro-note">')[1].split("</p>")[0]
    for column in ("step", "status", "preset", "caveat"):
        assert f"<b>{column}</b>: " in note and column not in headers
    assert "preset tiny is not the paper&#x27;s scale" in note
