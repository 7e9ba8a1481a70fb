"""The results catalogue (presentation/catalogue.py): every paper result has every column, every
results view is in it, and docs/catalogue.md is its current Markdown."""

from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.presentation.catalogue import TABLE_COMPUTATIONS, catalogue, catalogue_markdown
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.sql_files import view_definitions

ROWS = catalogue()


def test_every_result_has_every_column() -> None:
    assert {f"{row.paper} {row.result} ({row.view})": row.missing() for row in ROWS if row.missing()} == {}


def test_every_results_view_of_a_paper_is_a_row() -> None:
    results = {view.name for view in view_definitions() if view.layer == "results"}
    about_the_papers = {"reproduction_scorecard", "claim_judgments"}  # judged claims, in docs/papers/scorecard.md
    assert {row.view for row in ROWS} == results - about_the_papers


def test_every_fact_kind_has_its_computation() -> None:
    assert set(FACT_KINDS) <= set(TABLE_COMPUTATIONS)


def test_a_row_follows_the_view_down_to_the_math() -> None:
    """Clark Table 1 reads relation hits and gold dependencies through its two aggregates."""
    row = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    assert row.aggregates == ("agg_dependency_head_accuracy", "agg_dependency_offset_baselines")
    assert row.facts == ("dependencies", "relation_hits")
    assert row.compute == ("compute.metrics.most_attended_words",)
    assert "tests/views/test_dependency.py" in row.tests
    assert row.docs.startswith("papers/clark.md#")


def test_the_docs_page_is_current() -> None:
    page = PROJECT_ROOT / "docs" / "catalogue.md"
    assert page.read_text(encoding="utf-8") == catalogue_markdown(ROWS), (
        "docs/catalogue.md is stale: .venv/bin/attn-warehouse catalogue --markdown > docs/catalogue.md"
    )


def test_every_docs_link_names_a_heading_of_its_page() -> None:
    from dagster_project.presentation.catalogue import _slug

    for row in ROWS:
        page, _, anchor = row.docs.partition("#")
        headings = [
            line[3:] for line in (PROJECT_ROOT / "docs" / page).read_text().splitlines() if line.startswith("## ")
        ]
        assert anchor in {_slug(heading) for heading in headings}, row.docs
