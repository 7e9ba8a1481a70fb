"""Contracts of the results views, the way dbt's schema tests state a model's: each view's grain
(the key columns no two rows share), its value ranges, accepted values and columns that are never
null, declared once in sql/results/<view>.yaml beside the view's file (claim_judgments, a view
generated from sql/claims, has its file there too). view_contracts reads them and fails when a
results view has none; contract_violations checks one on a warehouse in SQL, the way dbt's
unique_combination_of_columns, accepted_range, accepted_values and not_null tests do.

A contract file:

    grain: [model_id, corpus, layer, head]    # unique together
    not_null: [model_id, corpus, layer, head, to_cls]
    ranges:                                   # [low, high], both included; null: no bound; NaN never in
      to_cls: [0, 1]
      n_examples: [0, null]
    accepted_values:
      mean_over: [examples]
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import yaml

from dagster_project.settings import SQL_DIR
from dagster_project.storage.sql_files import view_definitions

RESULTS_LAYER = "results"
CONTRACT_SUFFIX = ".yaml"
_KEYS = ("grain", "not_null", "ranges", "accepted_values")
# Ranges are checked with this much slack: shares and correlations are ratios of float sums, and
# one that is exactly 1 in the math may come out one rounding step above it.
RANGE_TOLERANCE = 1e-9
# How many offending rows a violation quotes.
EXAMPLES_SHOWN = 3


@dataclass(frozen=True)
class ViewContract:
    """What every row of a results view keeps: `grain` unique together, `not_null` never null,
    each `ranges` column within [low, high] (None: unbounded), each `accepted_values` column one
    of its values (or null)."""

    view: str
    grain: tuple[str, ...]
    not_null: tuple[str, ...] = ()
    ranges: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    accepted_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def columns(self) -> set[str]:
        """Every column the contract names."""
        return {*self.grain, *self.not_null, *self.ranges, *self.accepted_values}

    def rules(self) -> list[str]:
        """The contract in words, one rule a line ("grain: model_id, corpus, layer, head",
        "to_cls in [0, 1]", "n_examples >= 0"), for the view's card."""
        lines = [f"grain: {', '.join(self.grain)}"]
        if self.not_null:
            lines.append(f"not null: {', '.join(self.not_null)}")
        for column, (low, high) in self.ranges.items():
            if low is not None and high is not None:
                lines.append(f"{column} in [{low:g}, {high:g}]")
            else:
                lines.append(f"{column} >= {low:g}" if low is not None else f"{column} <= {high:g}")
        lines += [f"{column} in {{{', '.join(values)}}}" for column, values in self.accepted_values.items()]
        return lines


def contract_path(view: str, sql_dir: Path | None = None) -> Path:
    """Where the contract of results view `view` lives: sql/results/<view>.yaml (under `sql_dir` when given)."""
    return (sql_dir or SQL_DIR) / RESULTS_LAYER / f"{view}{CONTRACT_SUFFIX}"


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise ValueError(f"{where} must be a list of column names, not {value!r}")
    if len(set(value)) < len(value):
        raise ValueError(f"{where} names a column twice: {value!r}")
    return tuple(value)


def _bound(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{where} must be a number or null, not {value!r}")
    return float(value)


def _range(value: object, where: str) -> tuple[float | None, float | None]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{where} must be [low, high] (null for no bound), not {value!r}")
    low, high = _bound(value[0], f"{where}'s low"), _bound(value[1], f"{where}'s high")
    if low is None and high is None or (low is not None and high is not None and low > high):
        raise ValueError(f"{where} must bound the column, low <= high, not {value!r}")
    return low, high


def _mapping(value: object, where: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{where} must map column names to their rule, not {value!r}")
    return value


def load_contract(path: Path, view: str) -> ViewContract:
    """The contract in `path` of results view `view`; raises ValueError naming the file and what
    is wrong in it (a missing grain, an unknown key, a range that is not [low, high])."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict) or "grain" not in data:
        raise ValueError(f"{path}: a contract is a mapping with at least a `grain` (see docs/howto/add-view.md)")
    unknown = set(data) - set(_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; a contract's keys are {', '.join(_KEYS)}")
    ranges = _mapping(data.get("ranges") or {}, f"{path}: ranges")
    accepted = _mapping(data.get("accepted_values") or {}, f"{path}: accepted_values")
    return ViewContract(
        view=view,
        grain=_names(data["grain"], f"{path}: grain"),
        not_null=_names(data.get("not_null") or [], f"{path}: not_null"),
        ranges={column: _range(bounds, f"{path}: ranges.{column}") for column, bounds in ranges.items()},
        accepted_values={
            column: _names(values, f"{path}: accepted_values.{column}") for column, values in accepted.items()
        },
    )


def view_contracts(sql_dir: Path | None = None) -> dict[str, ViewContract]:
    """Every results view's contract (sql/results/<view>.yaml), in the views' creation order.
    Raises ValueError listing the results views that have no contract file, and the contract
    files that name no results view."""
    sql_dir = sql_dir or SQL_DIR
    views = [view for view in view_definitions(sql_dir) if view.layer == RESULTS_LAYER]
    missing = sorted(view.name for view in views if not contract_path(view.name, sql_dir).is_file())
    if missing:
        wanted = "; ".join(f"{name}: {contract_path(name, sql_dir)}" for name in missing)
        raise ValueError(
            f"results views without a contract: {wanted}. Write each file with the view's grain and the "
            "ranges of its values (docs/howto/add-view.md)"
        )
    names = {view.name for view in views}
    orphans = sorted(path for path in (sql_dir / RESULTS_LAYER).glob(f"*{CONTRACT_SUFFIX}") if path.stem not in names)
    if orphans:
        raise ValueError(
            f"contracts of no results view: {', '.join(map(str, orphans))}; rename each after its view or delete it"
        )
    return {view.name: load_contract(contract_path(view.name, sql_dir), view.name) for view in views}


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _example(row: tuple) -> str:
    return "(" + ", ".join(map(repr, row)) + ")"


def contract_violations(conn: duckdb.DuckDBPyConnection, contract: ViewContract) -> list[str]:
    """What the rows of `contract.view` on `conn` break of its contract, one sentence per broken
    rule naming how many rows and a few of them; empty when every rule holds (as on an empty view).
    A column the view does not have is a violation too. One query computes the view once (a view
    over the claims' judges takes seconds) and every rule over it. Column names come from the
    contract and are checked against the view's columns before they are quoted into the SQL;
    bounds and values are parameters."""
    view = contract.view
    # from the catalog, which a view's columns enter when it is created: DESCRIBE would plan the view
    columns = {
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main'", [view]
        ).fetchall()
    }
    unknown = sorted(contract.columns() - columns)
    if unknown:
        has = ", ".join(sorted(columns))
        return [f"{view}: the contract names columns the view lacks: {', '.join(unknown)} (it has {has})"]
    grain = ", ".join(map(_quoted, contract.grain))
    params: dict[str, object] = {"shown": EXAMPLES_SHOWN}
    measures = [
        "(SELECT count(*) FROM duplicated)",
        f"(SELECT list(row({grain}, n_rows) ORDER BY n_rows DESC, {grain})[1:$shown] FROM duplicated)",
    ]
    measures += [f"count(*) FILTER ({_quoted(column)} IS NULL)" for column in contract.not_null]
    for index, (column, (low, high)) in enumerate(contract.ranges.items()):
        params[f"low_{index}"] = -math.inf if low is None else low - RANGE_TOLERANCE
        params[f"high_{index}"] = math.inf if high is None else high + RANGE_TOLERANCE
        outside = f"FILTER (NOT ({_quoted(column)}::DOUBLE BETWEEN $low_{index} AND $high_{index}))"
        measures += [f"count(*) {outside}", f"min({_quoted(column)}) {outside}", f"max({_quoted(column)}) {outside}"]
    for index, (column, values) in enumerate(contract.accepted_values.items()):
        params[f"values_{index}"] = list(values)
        quoted = _quoted(column)
        measures.append(
            f"(SELECT list(row(value, n_rows) ORDER BY value)[1:$shown] FROM (SELECT {quoted} AS value, "
            f"count(*) AS n_rows FROM checked WHERE NOT list_contains($values_{index}, {quoted}) GROUP BY ALL))"
        )
    row = iter(
        conn.execute(
            f"WITH checked AS MATERIALIZED (SELECT {', '.join(map(_quoted, sorted(contract.columns())))} "
            f"FROM {_quoted(view)}), duplicated AS (SELECT {grain}, count(*) AS n_rows FROM checked "
            f"GROUP BY {grain} HAVING count(*) > 1) SELECT {', '.join(measures)} FROM checked",
            params,
        ).fetchone()
    )
    found: list[str] = []
    duplicated_keys, duplicates = next(row), next(row)
    if duplicated_keys:
        shown = ", ".join(f"{_example(key[:-1])} x{key[-1]}" for key in duplicates)
        found.append(
            f"{view}: {duplicated_keys} key(s) of the grain ({', '.join(contract.grain)}) have several rows, "
            f"e.g. {shown}"
        )
    for column in contract.not_null:
        nulls = next(row)
        if nulls:
            found.append(f"{view}.{column}: {nulls} row(s) are null")
    for column, (low, high) in contract.ranges.items():
        outside, smallest, largest = next(row), next(row), next(row)
        if outside:
            bounds = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
            found.append(f"{view}.{column}: {outside} row(s) outside {bounds}, from {smallest!r} to {largest!r}")
    for column, values in contract.accepted_values.items():
        others = next(row)
        if others:
            shown = ", ".join(f"{value!r} x{count}" for value, count in others)
            found.append(f"{view}.{column}: values outside {{{', '.join(values)}}}: {shown}")
    return found


def check_contracts(conn: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Per results view that breaks its contract on `conn`, what it breaks (contract_violations);
    empty when every view keeps its contract."""
    found = {view: contract_violations(conn, contract) for view, contract in view_contracts().items()}
    return {view: violations for view, violations in found.items() if violations}
