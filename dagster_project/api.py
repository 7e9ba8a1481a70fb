"""The Python API for notebooks: the warehouse opened read-only, its results by the names the papers
give them, ad-hoc SQL as polars frames, and one example's attention maps recomputed by the pass
the warehouse uses. `from dagster_project import open_warehouse` loads it (docs/howto/python.md)."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import polars as pl

from dagster_project import settings
from dagster_project.storage.backend import READ_LOCK_WAIT_SECONDS, WarehouseConfig, check_read_query

__all__ = ["Warehouse", "example_maps", "open_warehouse"]


class Warehouse:
    """A read-only connection to the warehouse. While it is open, runs cannot write the DuckDB file:
    close it (or use it in a `with` block) when done."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, description: str) -> None:
        self._conn = conn
        self.description = description

    def __repr__(self) -> str:
        return f"Warehouse({self.description})"

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection, so that runs can write the warehouse again."""
        self._conn.close()

    def sql(self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> pl.DataFrame:
        """The rows of `query`, one SELECT (or WITH, DESCRIBE, SHOW) statement, with `params` bound
        to its `?` or `$name` placeholders; any other statement, or one that calls a table function
        that writes (storage/backend.py REFUSED_FUNCTIONS), is a ReadOnlyQueryError, and a read of a
        file or URL outside the warehouse a duckdb.PermissionException."""
        check_read_query(self._conn, query)
        return self._conn.execute(query, params).pl()

    def views(self) -> list[str]:
        """The results views (sql/results) this warehouse has, by name."""
        from dagster_project.storage.sql_files import view_definitions

        names = self._conn.execute("SELECT table_name FROM information_schema.tables").fetchall()
        present = {name for (name,) in names}
        return sorted(view.name for view in view_definitions() if view.layer == "results" and view.name in present)

    def result(self, paper: str, name: str, view: str | None = None) -> pl.DataFrame:
        """The rows of a paper's result named as a person writes it: `result("clark", "table 1")`,
        `result("pascual", "figure 2")` (presentation/catalogue.py results_named). Where the name
        fits several views (Clark Fig. 6 has two), `view` chooses one; without it that is a
        ValueError listing them."""
        from dagster_project.presentation.catalogue import results_named

        found = results_named(paper, name)
        views = list(dict.fromkeys(result.view for result in found))
        if view is not None:
            if view not in views:
                raise ValueError(f"{paper} {name!r} is drawn from {', '.join(views)}, not {view}")
            views = [view]
        if len(views) > 1:
            raise ValueError(f"{paper} {name!r} names several views: {', '.join(views)}; choose one with view=")
        return self._conn.table(views[0]).pl()

    def scorecard(self, model: str | None = None, paper: str | None = None) -> pl.DataFrame:
        """Every paper claim's verdict (reproduction_scorecard), for one model and one paper when given."""
        from dagster_project.presentation.scorecard import scorecard_rows

        return scorecard_rows(self._conn, model, paper)

    def example_maps(
        self,
        model: str,
        corpus: str,
        example_id: int,
        layer: int | None = None,
        head: int | None = None,
        data_dir: Path | None = None,
    ) -> pl.DataFrame:
        """One example's attention maps recomputed (module-level example_maps), read with this connection."""
        return _maps(*_lookups(self._conn, model, corpus, example_id), corpus, example_id, layer, head, data_dir)


def open_warehouse(path: str | Path | None = None) -> Warehouse:
    """The warehouse opened read-only, with every table and view: the DuckDB file at `path`, or
    the configured one (ATTN_WAREHOUSE_BACKEND, ATTN_WAREHOUSE or the DuckLake settings, as
    `attn-warehouse sql` reads them). Raises FileNotFoundError where there is none yet."""
    config = WarehouseConfig("duckdb", str(path)) if path is not None else WarehouseConfig.from_env()
    if not config.exists():
        raise FileNotFoundError(config.missing_message())
    try:
        conn = config.connect_read_only()
    except duckdb.IOException as error:
        if "could not set lock" not in str(error).lower():
            raise
        raise RuntimeError(
            f"the warehouse {config.database} is being written by another process (a run?) and stayed locked for "
            f"{READ_LOCK_WAIT_SECONDS:.0f} s: try again when it ends"
        ) from error
    return Warehouse(conn, config.describe())


def example_maps(
    model: str,
    corpus: str,
    example_id: int,
    layer: int | None = None,
    head: int | None = None,
    data_dir: Path | None = None,
) -> pl.DataFrame:
    """Every head's attention map of one example, recomputed by the attention pass's
    head_example_maps kind: rows (layer, head, query, key, query_token, key_token, attention),
    layers and heads 1-based and positions 0-based as in the warehouse, only `layer` and `head`
    where given.

    `model` is a model_id or source registered in the configured warehouse, or any hub id or
    local path. The example's word pieces are the warehouse's where the model has that corpus
    (exactly what its pass ran on); otherwise the corpus is read from `data_dir` (default
    ATTN_DATA_DIR) and encoded as its corpus asset did, with the max_len, seed and overlong the
    warehouse records for the corpus, so example ids match. The warehouse is open only while
    these are read, not while the model runs."""
    lookups: tuple[str, pl.DataFrame | None, dict[str, Any] | None] = (model, None, None)
    if WarehouseConfig.from_env().exists():
        with open_warehouse() as warehouse:
            lookups = _lookups(warehouse._conn, model, corpus, example_id)
    return _maps(*lookups, corpus, example_id, layer, head, data_dir)


def _lookups(
    conn: duckdb.DuckDBPyConnection, model: str, corpus: str, example_id: int
) -> tuple[str, pl.DataFrame | None, dict[str, Any] | None]:
    """From the warehouse: the model's source, the example's pieces for that model (None: not
    there), and the corpus's recorded sampling settings, this model's first (None: no model has
    the corpus)."""
    found = conn.execute(
        "SELECT model_id, source FROM models WHERE $model IN (model_id, source) ORDER BY model_id = $model DESC",
        {"model": model},
    ).fetchone()
    model_id, source = found if found is not None else (None, model)
    tokens = conn.execute(
        "SELECT * FROM stg_tokens WHERE model_id = ? AND corpus = ? AND example_id = ? ORDER BY position",
        [model_id, corpus, example_id],
    ).pl()
    if tokens.height:
        return source, tokens, None
    recorded = conn.execute(
        "SELECT max_len, seed, overlong FROM stg_examples WHERE corpus = ? "
        "ORDER BY model_id IS NOT DISTINCT FROM ? DESC LIMIT 1",
        [corpus, model_id],
    ).pl()
    return source, None, recorded.row(0, named=True) if recorded.height else None


def _maps(
    source: str,
    tokens: pl.DataFrame | None,
    recorded: dict[str, Any] | None,
    corpus: str,
    example_id: int,
    layer: int | None,
    head: int | None,
    data_dir: Path | None,
) -> pl.DataFrame:
    """Load `source` and run the head_example_maps kind of the attention pass on the example."""
    from dagster_project.compute.attention_pass import extract_attention_facts, pass_inputs
    from dagster_project.compute.fact_kinds import FACT_KINDS
    from dagster_project.compute.models import load_encoder

    encoder = load_encoder(source)
    for name, value, most in (("layer", layer, encoder.spec.n_layers), ("head", head, encoder.spec.n_heads)):
        if value is not None and not 1 <= value <= most:
            raise ValueError(f"{name} {value} is not one of the model's {name}s 1..{most}")
    if tokens is None:
        tokens = _encoded_example(encoder.tokenizer, corpus, example_id, recorded, data_dir or settings.data_dir())
    facts = extract_attention_facts(
        encoder, tokens, (FACT_KINDS["head_example_maps"],), pass_inputs(encoder, tokens)
    ).tables["head_example_maps"]
    if layer is not None:
        facts = facts.filter(pl.col("layer") == layer)
    if head is not None:
        facts = facts.filter(pl.col("head") == head)
    pieces = tokens.select(pl.col("position").cast(pl.Int16), "token")
    return (
        facts.with_columns(key=pl.int_ranges(pl.col("attention").list.len(), dtype=pl.Int16))
        .explode("key", "attention")
        .join(pieces.rename({"position": "query", "token": "query_token"}), on="query", how="left")
        .join(pieces.rename({"position": "key", "token": "key_token"}), on="key", how="left")
        .select("layer", "head", "query", "key", "query_token", "key_token", "attention")
        .sort("layer", "head", "query", "key")
    )


def _encoded_example(
    tokenizer: Any, corpus: str, example_id: int, recorded: dict[str, Any] | None, data_dir: Path
) -> pl.DataFrame:
    """The example's pieces, the corpus read and encoded as corpora/tables.py corpus_tables does
    (without the spaCy annotation, which the pass does not read) with the recorded settings."""
    from dagster_project.corpora import CORPORA, encode_corpus

    if corpus not in CORPORA:
        raise ValueError(f"no corpus {corpus!r}: the corpora are {', '.join(CORPORA)}")
    if recorded is None:
        raise ValueError(
            f"the warehouse has no examples of {corpus}, so the max_len and seed that number its examples are "
            f"unknown: materialize them first (`attn-warehouse run MODEL --corpus {corpus}`)"
        )
    spec = CORPORA[corpus]
    max_len, seed, overlong = recorded["max_len"], recorded["seed"], recorded["overlong"] or spec.overlong
    data = spec.read(data_dir)
    if spec.prepare:
        data = spec.prepare(data, tokenizer, max_len, overlong)
    encoded = encode_corpus(data, tokenizer, max_len, None, seed, "drop" if spec.prepare else overlong)
    tokens = encoded.tokens.filter(pl.col("example_id") == example_id)
    if tokens.is_empty():
        raise ValueError(f"{corpus} has no example {example_id} for this model (with max_len {max_len})")
    return tokens
