"""The papers' claims as data: sql/claims/<paper>.yaml lists every finding of a paper that the
warehouse can check, each with the paper's sentence, its number for BERT-base and a `judge`
query over the results views. From the registry come the `claims` table (one row per claim,
written with the views), the generated view `claim_judgments` (every judge's rows, tagged with
the claim) and, through sql/results/reproduction_scorecard.sql, the verdict of every claim for
every registered model.

A judge is a SELECT returning one row per (model_id, corpus) it can judge, with the columns of
JUDGE_COLUMNS: `value` the model's number (on the scale of the paper's), `verdict` one of
VERDICTS, `reason` a sentence saying what was compared, `n` how many heads, layers, tasks or
examples the value rests on. A model the judge returns no row for is `missing` in the scorecard,
with the claim's `needs`. Depth-dependent claims read a head's depth as the BERT-base layer at the
same relative depth, `ceil(12 * relative_depth - 1e-9)` (relative_depth = (layer - 0.5) / n_layers,
so a 6-layer model's layers stand for BERT-base layers 1, 3, 5, 7, 9 and 11).

An entry with `each` is a template: one claim per item of the list, whose keys fill the {names}
of the entry's id, quote, paper_text and judge (the items are constants of the registry, never
user input). `{paper_value}` in a judge is the claim's paper_value."""

import functools
import re
import string
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import yaml

from dagster_project.settings import SQL_DIR

CLAIMS_DIR = "claims"
JUDGMENTS_VIEW = "claim_judgments"
JUDGE_COLUMNS = ("model_id", "corpus", "value", "verdict", "reason", "n")
VERDICTS = ("holds", "fails", "not comparable", "missing")
PAPERS = ("clark", "kovaleva", "pascual", "compare")  # compare: the other papers the weightings come from
# The keys of a registry entry, and those it must have.
_FIELDS = ("id", "result", "chart", "section", "quote", "paper_value", "paper_text", "needs", "judge", "each")
_REQUIRED = ("id", "result", "section", "quote", "paper_text", "needs", "judge")
_ID = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Claim:
    """One finding of a paper and how it is judged on any model."""

    claim: str  # its id: lower-case words joined by '_', starting with the paper's key
    paper: str  # a key of PAPERS
    result: str  # the paper's figure or table ("Fig. 2", "Table 1", "§4.4")
    chart: str | None  # the chart asset that draws the result (presentation/chart_registry.py)
    section: str  # where in the paper the sentence is
    quote: str  # the paper's sentence, quoted
    paper_value: float | None  # the paper's number for BERT-base, where it gives one
    paper_text: str  # the paper's number(s) as the paper states them
    needs: str  # what a model lacking rows needs (the run that fills the views the judge reads)
    judge: str  # the SELECT, its placeholders filled
    template: str = ""  # the registry entry's id, {names} unfilled (the claim's own id when it has no `each`)
    params: tuple[tuple[str, str], ...] = ()  # the `each` item the claim was made from

    def row(self, order: int) -> dict:
        return {name: getattr(self, name) for name in CLAIM_COLUMNS if name != "claim_order"} | {"claim_order": order}


CLAIM_COLUMNS = (
    "claim",
    "claim_order",
    "paper",
    "result",
    "chart",
    "section",
    "quote",
    "paper_value",
    "paper_text",
    "needs",
)


def _fill(text: str, values: dict, where: str) -> str:
    names = {name for _, name, _, _ in string.Formatter().parse(text) if name}
    unknown = names - set(values)
    if unknown:
        raise ValueError(f"{where}: no value for {{{', '.join(sorted(unknown))}}} (known: {', '.join(sorted(values))})")
    return text.format(**values)


def _claims_of_entry(entry: dict, paper: str, path: Path) -> list[Claim]:
    where = f"{path}: claim {entry.get('id', '?')}"
    unknown = set(entry) - set(_FIELDS)
    missing = [name for name in _REQUIRED if not entry.get(name)]
    if unknown or missing:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}, missing keys {missing}")
    claims = []
    for item in entry.get("each") or [{}]:
        values = {key: str(value) for key, value in item.items()}
        paper_value = item.get("paper_value", entry.get("paper_value"))
        if paper_value is not None and not isinstance(paper_value, int | float):
            raise ValueError(f"{where}: paper_value must be a number, got {paper_value!r}")
        values["paper_value"] = repr(float(paper_value)) if paper_value is not None else "NULL"
        claim_id = _fill(entry["id"], values, where).lower()
        if not _ID.fullmatch(claim_id) or not claim_id.startswith(f"{paper}_"):
            raise ValueError(f"{where}: id {claim_id!r} must be words joined by '_', starting with '{paper}_'")
        claims.append(
            Claim(
                claim=claim_id,
                paper=paper,
                result=entry["result"],
                chart=entry.get("chart"),
                section=entry["section"],
                quote=_fill(entry["quote"], values, where).strip(),
                paper_value=None if paper_value is None else float(paper_value),
                paper_text=_fill(entry["paper_text"], values, where),
                needs=entry["needs"].strip(),
                judge=_fill(entry["judge"], values, where).strip().rstrip(";"),
                template=entry["id"],
                params=tuple(sorted(values.items())),
            )
        )
    return claims


def claim_files(sql_dir: Path | None = None) -> list[Path]:
    return sorted(((sql_dir or SQL_DIR) / CLAIMS_DIR).glob("*.yaml"))


@functools.cache
def _load(paths: tuple[Path, ...], texts: tuple[str, ...]) -> tuple[Claim, ...]:
    claims: list[Claim] = []
    for path, text in zip(paths, texts):
        paper = path.stem
        if paper not in PAPERS:
            raise ValueError(f"{path}: a claims file is named after its paper, one of {', '.join(PAPERS)}")
        entries = yaml.safe_load(text) or []
        if not isinstance(entries, list):
            raise ValueError(f"{path}: expected a list of claims")
        for entry in entries:
            claims.extend(_claims_of_entry(entry, paper, path))
    seen: set[str] = set()
    for claim in claims:
        if claim.claim in seen:
            raise ValueError(f"claim {claim.claim} is defined twice in {paths[0].parent}")
        seen.add(claim.claim)
    return tuple(claims)


def load_claims(sql_dir: Path | None = None) -> tuple[Claim, ...]:
    """Every claim of sql/claims (or `sql_dir`/claims), papers in file order, claims in file order."""
    paths = tuple(claim_files(sql_dir))
    return _load(paths, tuple(path.read_text() for path in paths))


def judgments_sql(claims: tuple[Claim, ...]) -> str:
    """CREATE statement of the view that stacks every claim's judge, tagged with its claim id
    (ids are checked against _ID, so they are safe as SQL string literals)."""
    parts = [
        f"SELECT '{claim.claim}' AS claim, model_id, corpus, value::DOUBLE AS value, verdict::VARCHAR AS verdict, "
        f"reason::VARCHAR AS reason, n::BIGINT AS n\nFROM (\n{claim.judge}\n) AS judged_{index}"
        for index, claim in enumerate(claims)
    ]
    empty = (
        "SELECT NULL::VARCHAR AS claim, NULL::VARCHAR AS model_id, NULL::VARCHAR AS corpus, NULL::DOUBLE AS value, "
        "NULL::VARCHAR AS verdict, NULL::VARCHAR AS reason, NULL::BIGINT AS n WHERE false"
    )
    header = (
        "-- Generated from sql/claims/*.yaml (storage/claims.py): every claim's judge, one row per\n"
        "-- (claim, model_id, corpus) it could judge. reproduction_scorecard adds the claims and the models.\n"
    )
    return f"{header}CREATE OR REPLACE VIEW {JUDGMENTS_VIEW} AS\n" + "\nUNION ALL\n".join(parts or [empty]) + ";\n"


def claims_frame(claims: tuple[Claim, ...]) -> pl.DataFrame:
    """The `claims` table's rows."""
    schema = {name: pl.String for name in CLAIM_COLUMNS} | {"claim_order": pl.Int32, "paper_value": pl.Float64}
    return pl.DataFrame([claim.row(order) for order, claim in enumerate(claims)], schema=schema).select(CLAIM_COLUMNS)
