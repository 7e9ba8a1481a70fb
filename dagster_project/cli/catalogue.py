"""`attn-warehouse catalogue`: every paper result with the view, aggregates, facts, compute
functions, chart, tests and docs section that make it (presentation/catalogue.py); its cards in
the docs (presentation/result_cards.py)."""

import argparse

HELP = "list every paper result and what builds it: view, aggregates, facts, compute, chart, tests, docs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --markdown (print the docs page) or --write-docs (rewrite it and the paper pages' result cards)."""
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--markdown", action="store_true", help="print the docs page (docs/catalogue.md) instead")
    shown.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite docs/catalogue.md and the result cards of the paper pages (docs/papers/*.md)",
    )


def command(args: argparse.Namespace) -> int:
    """Print every paper result and what builds it, four lines each; or print the docs page (--markdown);
    or rewrite docs/catalogue.md and the paper pages' cards (--write-docs). Always 0."""
    from dagster_project.presentation.catalogue import catalogue
    from dagster_project.presentation.result_cards import catalogue_markdown, refresh_docs
    from dagster_project.settings import PROJECT_ROOT

    rows = catalogue()
    if args.markdown:
        print(catalogue_markdown(rows), end="")
        return 0
    if args.write_docs:
        for page in refresh_docs(rows):
            print(f"rewrote {page.relative_to(PROJECT_ROOT)}")
        return 0
    for row in rows:
        print(f"{row.paper:<9} {row.result:<12} {row.view:<32} chart {row.chart or '-'}")
        print(f"{'':<23}aggregates {', '.join(row.aggregates) or '-'}; facts {', '.join(row.facts)}")
        print(f"{'':<23}compute {', '.join(row.compute)}; drawn by {row.chart_function or '-'}")
        print(f"{'':<23}tests {', '.join(row.tests)}; docs docs/{row.docs}; fill it: {row.command or '-'}")
    return 0
