"""`attn-warehouse catalogue`: every paper result with the view, aggregates, facts, compute
functions, chart, tests and docs section that make it (presentation/catalogue.py)."""

import argparse

HELP = "list every paper result and what builds it: view, aggregates, facts, compute, chart, tests, docs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print the docs page (docs/catalogue.md) instead")


def command(args: argparse.Namespace) -> int:
    from dagster_project.presentation.catalogue import catalogue, catalogue_markdown

    rows = catalogue()
    if args.markdown:
        print(catalogue_markdown(rows), end="")
        return 0
    for row in rows:
        print(f"{row.paper:<9} {row.result:<12} {row.view:<32} chart {row.chart or '-'}")
        print(f"{'':<23}aggregates {', '.join(row.aggregates) or '-'}; facts {', '.join(row.facts)}")
        print(f"{'':<23}compute {', '.join(row.compute)}")
        print(f"{'':<23}tests {', '.join(row.tests)}; docs docs/{row.docs}")
    return 0
