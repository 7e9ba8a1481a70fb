"""Whether the warehouse's facts describe the examples it holds: the (model, corpus) pairs whose
facts were computed from examples since replaced (sql/intermediate/int_facts_of_replaced_examples.sql),
with the command that fixes each, as lines for the CLI's readers and a note for the report."""

import html

import duckdb
import polars as pl

FACTS_OF_REPLACED_EXAMPLES = "int_facts_of_replaced_examples"


def facts_of_replaced_examples(conn: duckdb.DuckDBPyConnection, corpus: str | None = None) -> pl.DataFrame:
    """The view's rows (of one corpus): model_id, model, corpus, fix, ...; none where the
    warehouse's views come from code older than the view."""
    try:
        rows = conn.table(FACTS_OF_REPLACED_EXAMPLES)
    except duckdb.CatalogException:
        return pl.DataFrame(schema={"model_id": pl.String, "model": pl.String, "corpus": pl.String, "fix": pl.String})
    if corpus is not None:
        rows = rows.filter(duckdb.ColumnExpression("corpus") == duckdb.ConstantExpression(corpus))
    return rows.pl()


def _mismatch(model: str, corpus: str) -> str:
    return (
        f"the {corpus} facts of {model} were computed from examples the warehouse no longer holds (a later run "
        "sampled them anew and its facts step failed or has not run): the views mix the two"
    )


def replaced_examples_lines(rows: pl.DataFrame) -> list[str]:
    """One line per pair of `rows` (facts_of_replaced_examples): what is mixed, and the run that fixes it."""
    return [
        f"warning: {_mismatch(row['model'], row['corpus'])}; `{row['fix']}` writes facts of the current examples"
        for row in rows.iter_rows(named=True)
    ]


def replaced_examples_notes(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """replaced_examples_lines of the warehouse behind `conn`: what `sql` and `scorecard` print after
    their rows."""
    return replaced_examples_lines(facts_of_replaced_examples(conn))


def replaced_examples_html(rows: pl.DataFrame) -> str:
    """The report's note on the pairs of `rows` (facts_of_replaced_examples); empty when there are none."""
    if rows.is_empty():
        return ""
    items = "".join(
        f"<li>{html.escape(_mismatch(row['model'], row['corpus']))}: run <code>{html.escape(row['fix'])}</code></li>"
        for row in rows.iter_rows(named=True)
    )
    return f'<div class="missing"><p><b>Facts and examples out of step</b></p><ul>{items}</ul></div>'
