"""The papers' claims as data: sql/claims/<paper>.yaml lists every finding of a paper that the
warehouse can check, each with the paper's sentence, its number for BERT-base and how it is judged
over the results views. From the registry come the `claims` table (one row per claim, written with
the views), the generated view `claim_judgments` (every judge's rows, tagged with the claim) and,
through sql/results/reproduction_scorecard.sql, the verdict of every claim for every registered model.

A judge gives one row per (model_id, corpus) it can judge, with the columns of JUDGE_COLUMNS:
`value` the model's number (on the scale of the paper's), `value_low`/`value_high` its 95% interval,
`verdict` one of VERDICTS, `reason` a sentence saying what was compared and what it rests on, `n`
how many units (heads, layers, tasks, examples, sentences) the value rests on. A model the judge
returns no row for is `missing` in the scorecard, with the claim's `needs`. Depth-dependent claims
read a head's depth as the BERT-base layer at the same relative depth, `ceil(12 * relative_depth -
1e-9)` (relative_depth = (layer - 0.5) / n_layers, so a 6-layer model's layers stand for BERT-base
layers 1, 3, 5, 7, 9 and 11).

Most claims are written as a resampled statistic, and the judge is generated (bootstrap_judge):
- `sample`: a SELECT with one or more rows per unit the claim rests on: model_id, corpus, `unit`
  (the unit's key) and the columns the statistic needs; `unit` in the entry names the units (plural);
- `value`: an aggregate expression over the sample's rows (`avg(to_sep)`), or a query over the
  relation `resampled` that returns model_id, corpus, resample, value, reason, not_comparable per
  (model_id, corpus, resample) (for statistics of aggregates, such as the layer with the highest mean);
- `holds`: a condition on `value` (and `{paper_value}`), the paper's finding read as a number; with
  a `value` query, on any column the query returns (a margin beside the value it reports);
- `reason`: with an aggregate `value`, an aggregate expression saying what was compared;
- `not_comparable` (optional): with an aggregate `value`, an aggregate expression giving why the
  claim does not apply to this model, or NULL where it does.
The units are drawn with replacement N_RESAMPLES times (a seeded percentile bootstrap: resample r
draws the (hash(r * 2^32 + i) mod n)-th of the n units in sorted order, for i < n, so every run
draws alike). The verdict is `holds` when the condition holds on the sample and in at least
LEVEL + (1 - LEVEL) / 2 of the resamples, `fails` when it fails on the sample and holds in at
most (1 - LEVEL) / 2 of them, and `inconclusive` otherwise; for a threshold, that is the 95%
percentile interval lying wholly on one side of it.

A claim whose uncertainty the results views already carry (an accuracy's interval over the
sentences) may instead give a `judge`: a SELECT returning JUDGE_COLUMNS itself, `inconclusive`
included, with the interval it rests on.

An entry with `each` is a template: one claim per item of the list, whose keys fill the {names}
of the entry's id, quote, paper_text and queries (the items are constants of the registry, never
user input). `{paper_value}` in a query is the claim's paper_value."""

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
JUDGE_COLUMNS = ("model_id", "corpus", "value", "value_low", "value_high", "verdict", "reason", "n")
VERDICTS = ("holds", "fails", "inconclusive", "not comparable", "missing")
N_RESAMPLES = 1000
LEVEL = 0.95
PAPERS = ("clark", "kovaleva", "pascual", "compare")  # compare: the other papers the weightings come from
# The keys of a registry entry, and those it must have.
_STATISTIC = ("sample", "value", "holds")  # the fields of a resampled statistic
_FIELDS = ("id", "result", "chart", "section", "quote", "paper_value", "paper_text", "needs", "unit", "judge", "each")
_FIELDS += (*_STATISTIC, "reason", "not_comparable", "value_format")
_REQUIRED = ("id", "result", "section", "quote", "paper_text", "needs", "unit")
_QUERY = re.compile(r"\s*(SELECT|WITH)\b", re.IGNORECASE)
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
    unit: str  # what the value rests on and is resampled over (plural: "heads", "examples", "tasks")
    judge: str  # the SELECT returning JUDGE_COLUMNS, its placeholders filled
    template: str = ""  # the registry entry's id, {names} unfilled (the claim's own id when it has no `each`)
    params: tuple[tuple[str, str], ...] = ()  # the `each` item the claim was made from

    def row(self, order: int) -> dict:
        """The claim as a row of the `claims` table, at position `order`."""
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
    "unit",
)


def _fill(text: str, values: dict, where: str) -> str:
    names = {name for _, name, _, _ in string.Formatter().parse(text) if name}
    unknown = names - set(values)
    if unknown:
        raise ValueError(f"{where}: no value for {{{', '.join(sorted(unknown))}}} (known: {', '.join(sorted(values))})")
    return text.format(**values)


def bootstrap_judge(
    sample: str,
    value: str,
    holds: str,
    unit: str,
    reason: str | None = None,
    not_comparable: str | None = None,
    value_format: str = "%.3f",
) -> str:
    """The judge of a resampled statistic (the module's docstring says what each part is): the
    statistic on the sample (resample 0) and on N_RESAMPLES bootstrap resamples of its units, per
    (model_id, corpus), and the verdict from the share of resamples in which `holds` is true."""
    if _QUERY.match(value):
        if reason or not_comparable:
            raise ValueError("a `value` query returns its own reason and not_comparable columns")
        statistic = value.strip().rstrip(";")
    else:
        statistic = (
            f"SELECT model_id, corpus, resample, {value} AS value, {reason or 'NULL'} AS reason,\n"
            f"    {not_comparable or 'NULL'} AS not_comparable\n"
            "FROM resampled\nGROUP BY model_id, corpus, resample"
        )
    tail = (1 - LEVEL) / 2
    interval = (
        f"printf('; {100 * LEVEL:.0f}%% interval {value_format} to {value_format} over %d {unit} "
        f"(holds in %.1f%% of {N_RESAMPLES:,} resamples)', value_low, value_high, n, 100 * holding)"
    )
    return f"""WITH sample AS MATERIALIZED (
{sample.strip().rstrip(";")}
),
units AS MATERIALIZED (
    SELECT model_id, corpus, unit, row_number() OVER (PARTITION BY model_id, corpus ORDER BY unit) AS position
    FROM (SELECT DISTINCT model_id, corpus, unit FROM sample WHERE unit IS NOT NULL)
),
groups AS MATERIALIZED (
    SELECT model_id, corpus, count(*) AS n
    FROM units
    GROUP BY model_id, corpus
),
draws AS (
    SELECT model_id, corpus, 0 AS resample, unit FROM units
    UNION ALL
    SELECT u.model_id, u.corpus, d.resample, u.unit
    FROM (
        SELECT model_id, corpus, resample, (1 + hash((resample << 32) + draw) % n::UBIGINT)::BIGINT AS position
        FROM (
            SELECT model_id, corpus, n, resample, unnest(range(n)) AS draw
            FROM groups, range(1, {N_RESAMPLES + 1}) AS resamples(resample)
        )
    ) AS d
    JOIN units AS u USING (model_id, corpus, position)
),
resampled AS (
    SELECT d.resample, s.*
    FROM draws AS d
    JOIN sample AS s ON s.model_id = d.model_id AND s.corpus = d.corpus AND s.unit = d.unit
),
statistic AS (
{statistic}
),
summary AS (
    SELECT model_id, corpus,
        any_value(value) FILTER (WHERE resample = 0) AS value,
        any_value(coalesce(({holds}), false)) FILTER (WHERE resample = 0) AS holds_on_sample,
        quantile_cont(value, {tail!r}) FILTER (WHERE resample > 0) AS value_low,
        quantile_cont(value, {1 - tail!r}) FILTER (WHERE resample > 0) AS value_high,
        avg(coalesce(({holds}), false)::INTEGER) FILTER (WHERE resample > 0) AS holding,
        any_value(reason::VARCHAR) FILTER (WHERE resample = 0) AS reason,
        any_value(not_comparable::VARCHAR) FILTER (WHERE resample = 0) AS not_comparable
    FROM statistic
    GROUP BY model_id, corpus
),
judged AS (
    SELECT s.*, g.n
    FROM summary AS s
    JOIN groups AS g USING (model_id, corpus)
)
SELECT model_id, corpus,
    CASE WHEN not_comparable IS NULL THEN value END AS value,
    CASE WHEN not_comparable IS NULL AND n > 1 THEN value_low END AS value_low,
    CASE WHEN not_comparable IS NULL AND n > 1 THEN value_high END AS value_high,
    CASE WHEN not_comparable IS NOT NULL THEN 'not comparable'
        WHEN n = 1 THEN CASE WHEN holds_on_sample THEN 'holds' ELSE 'fails' END
        WHEN holds_on_sample AND holding >= {1 - tail!r} THEN 'holds'
        WHEN NOT holds_on_sample AND holding <= {tail!r} THEN 'fails'
        ELSE 'inconclusive' END AS verdict,
    CASE WHEN not_comparable IS NOT NULL THEN not_comparable
        WHEN n = 1 THEN reason || '; rests on a single unit, no interval'
        ELSE reason || {interval} END AS reason,
    n
FROM judged"""


def _claims_of_entry(entry: dict, paper: str, path: Path) -> list[Claim]:
    where = f"{path}: claim {entry.get('id', '?')}"
    unknown = set(entry) - set(_FIELDS)
    missing = [name for name in _REQUIRED if not entry.get(name)]
    statistic = [name for name in _STATISTIC if entry.get(name)]
    if entry.get("judge") and statistic or not entry.get("judge") and len(statistic) < len(_STATISTIC):
        missing.append(f"either judge or all of {', '.join(_STATISTIC)}")
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

        def filled(name: str, values: dict = values) -> str | None:
            return _fill(entry[name], values, where).strip() if entry.get(name) else None

        if entry.get("judge"):
            judge = filled("judge").rstrip(";")
        else:
            judge = bootstrap_judge(
                filled("sample"),
                filled("value"),
                filled("holds"),
                entry["unit"],
                filled("reason"),
                filled("not_comparable"),
                entry.get("value_format", "%.3f"),
            )
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
                unit=entry["unit"],
                judge=judge,
                template=entry["id"],
                params=tuple(sorted(values.items())),
            )
        )
    return claims


def claim_files(sql_dir: Path | None = None) -> list[Path]:
    """The claim registry's files, sql/claims/*.yaml (under `sql_dir` when given), by name."""
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
        f"SELECT '{claim.claim}' AS claim, model_id, corpus, value::DOUBLE AS value, value_low::DOUBLE AS value_low, "
        f"value_high::DOUBLE AS value_high, verdict::VARCHAR AS verdict, reason::VARCHAR AS reason, n::BIGINT AS n\n"
        f"FROM (\n{claim.judge}\n) AS judged_{index}"
        for index, claim in enumerate(claims)
    ]
    empty = (
        "SELECT NULL::VARCHAR AS claim, NULL::VARCHAR AS model_id, NULL::VARCHAR AS corpus, NULL::DOUBLE AS value, "
        "NULL::DOUBLE AS value_low, NULL::DOUBLE AS value_high, NULL::VARCHAR AS verdict, NULL::VARCHAR AS reason, "
        "NULL::BIGINT AS n WHERE false"
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
