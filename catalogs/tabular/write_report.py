"""Tool write_report: a Markdown or HTML report of a table: its shape, columns, statistics and first rows."""

from __future__ import annotations

import html

import pandas

from toolpath.catalogs.tabular._common import checked_output_path

#: File suffixes write_report writes: Markdown, then HTML.
REPORT_SUFFIXES = (".md", ".markdown", ".html", ".htm")


def write_report(table: pandas.DataFrame, path: str = "report.md", title: str = "Table report") -> str:
    """Write a report of ``table`` to ``path``: HTML when it ends in ``.html``/``.htm``, Markdown when it
    ends in ``.md``/``.markdown``.

    Returns:
        The report's path.

    Raises:
        OutputPathError: ``path`` has another suffix, is a directory, or is a file this kernel read as data.
    """
    path = checked_output_path(path, "write_report", REPORT_SUFFIXES, "report.md")
    statistics = table.describe(include="all").T
    head = table.head(5)
    if path.suffix.lower() in (".html", ".htm"):
        body = (
            f"<h1>{html.escape(title)}</h1>\n<p>{len(table)} rows, {len(table.columns)} columns.</p>\n"
            f"<h2>Statistics</h2>\n{statistics.to_html(na_rep='')}\n<h2>First rows</h2>\n{head.to_html(index=False)}\n"
        )
        path.write_text(f'<!doctype html>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n{body}', encoding="utf-8")
    else:
        columns = "\n".join(f"- `{column}` ({dtype})" for column, dtype in table.dtypes.items())
        text = f"# {title}\n\n{len(table)} rows, {len(table.columns)} columns.\n\n## Columns\n\n{columns}\n\n## Statistics\n\n{_markdown(statistics)}\n\n## First rows\n\n{_markdown(head, index=False)}\n"
        path.write_text(text, encoding="utf-8")
    return str(path)


def _markdown(frame: pandas.DataFrame, index: bool = True) -> str:
    """A Markdown pipe table (pandas' own needs the optional ``tabulate``)."""

    def cell(value: object) -> str:
        if value is None or (isinstance(value, float) and value != value):  # NaN
            return ""
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    header = ([""] if index else []) + [str(column) for column in frame.columns]
    rows = [([cell(label)] if index else []) + [cell(value) for value in values] for label, values in zip(frame.index, frame.itertuples(index=False))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
