"""The DuckLake backend on real servers: a PostgreSQL catalog (the machine's binaries) and S3
(moto's server), or SQLite / DuckDB catalog files and a local folder. Writes are Parquet
files under model_id=…/corpus=…, the staging views show the current batch, maintenance
removes replaced batches and their files, and analysts attach the lake read-only."""

from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.storage.batches import expire_replaced_batches, partition_rows
from dagster_project.storage.connections import LakeNotSetUpError
from dagster_project.storage.lake import LakeConfig, LakeConfigError, connect_lake, extension_file, maintain_files
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.schema import PARTITIONED_TABLES
from dagster_project.storage.views import apply_views
from tests.servers import POSTGRES_PASSWORD, POSTGRES_USER, S3Server, start_s3_process

SPEC = ModelSpec("org--m", "org/m", "/x", "r1", "bert", 1, 2, True)


def _summaries(to_cls: list[float]) -> pl.DataFrame:
    """Head 1 of layer 1 for examples 0, 1, ... with the given [CLS] mass and 10 tokens each."""
    n = len(to_cls)
    return pl.DataFrame({"example_id": range(n), "layer": [1] * n, "head": [1] * n, "n_tokens": [10] * n}).with_columns(
        to_cls=pl.Series(to_cls, dtype=pl.Float32)
    )


@pytest.fixture
def s3_lake(postgres_url: str, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> tuple[LakeConfig, str]:
    """A lake with its catalog in a new PostgreSQL database and its data in a new bucket."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3_server.create_bucket()
    return LakeConfig(postgres_url, f"s3://{bucket}/lake/"), bucket


def test_postgres_catalog_and_s3_data_current_batch_and_maintenance(s3_lake, s3_server: S3Server):
    config, bucket = s3_lake
    with connect_lake(config) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        replace_partition(conn, {"head_summaries": _summaries([0.1, 0.2])}, SPEC.model_id, "demo")
        replace_partition(conn, {"head_summaries": _summaries([0.5, 0.7, 0.9])}, SPEC.model_id, "demo")
        replace_partition(conn, {"head_summaries": _summaries([0.4])}, SPEC.model_id, "other")
        # the writes only appended: both batches of `demo` are in the table, one is current
        assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (6,)
        staged = conn.execute("SELECT corpus, list(to_cls ORDER BY example_id) FROM stg_head_summaries GROUP BY ALL")
        assert dict(staged.fetchall()) == {"demo": pytest.approx([0.5, 0.7, 0.9]), "other": pytest.approx([0.4])}
        (to_cls,) = conn.execute("SELECT to_cls FROM clark_special_tokens WHERE corpus = 'demo'").fetchone()
        assert to_cls == pytest.approx(0.7)  # (0.5 + 0.7 + 0.9) / 3, equal token counts
        assert partition_rows(conn, "head_summaries", SPEC.model_id, "demo")["to_cls"].to_list() == pytest.approx(
            [0.5, 0.7, 0.9]
        )
        keys = s3_server.keys(bucket, "lake/main/head_summaries/")
        folders = sorted({key.rsplit("/", 1)[0] for key in keys})
        assert folders == [
            "lake/main/head_summaries/model_id=org--m/corpus=demo",
            "lake/main/head_summaries/model_id=org--m/corpus=other",
        ]
        assert len(keys) == 3 and all(key.endswith(".parquet") for key in keys)

        # with the replaced batch of `demo`, the one of its aggregate (agg_head_attention_means, one head
        # under both weightings, mean_over) and that of agg_pattern_shares (no rows: the summaries have no pattern)
        assert expire_replaced_batches(conn) == {"head_summaries": 2, "agg_head_attention_means": 2, "batches": 3}
        assert conn.execute("SELECT count(*) FROM head_summaries").fetchone() == (4,)
        assert conn.execute("SELECT count(*) FROM batches WHERE table_name = 'head_summaries'").fetchone() == (2,)
        files = maintain_files(conn, keep=timedelta(0))
        assert files["expired_snapshots"] > 0
        # the replaced batch's Parquet file is gone from S3, the current ones stay
        assert len(s3_server.keys(bucket, "lake/main/head_summaries/")) == 2
        staged = conn.execute("SELECT corpus, count(*) FROM stg_head_summaries GROUP BY ALL ORDER BY ALL").fetchall()
        assert staged == [("demo", 3), ("other", 1)]


def test_analysts_attach_the_lake_read_only_from_their_own_duckdb(tmp_path: Path):
    config = LakeConfig(str(tmp_path / "catalog.sqlite"), str(tmp_path / "data"))
    with connect_lake(config) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        replace_partition(conn, {"head_summaries": _summaries([0.25, 0.75])}, SPEC.model_id, "demo")
    # what docs/operations/scaling-out.md shows: LOAD the extensions from the pip packages, ATTACH ... (READ_ONLY)
    analyst = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    analyst.load_extension(str(extension_file("ducklake")))
    analyst.load_extension(str(extension_file("sqlite_scanner")))
    analyst.execute(f"ATTACH 'ducklake:sqlite:{tmp_path / 'catalog.sqlite'}' AS lake (READ_ONLY)")
    assert analyst.execute("SELECT model, to_cls FROM lake.clark_special_tokens").fetchall() == [
        ("org/m", pytest.approx(0.5))
    ]
    with pytest.raises(duckdb.Error, match="read-only|read only"):
        analyst.execute("DELETE FROM lake.head_summaries")
    analyst.close()


def test_an_unreachable_catalog_is_named_with_its_password_masked(tmp_path: Path, postgres_server):
    closed = postgres_server.url("nowhere").replace(f":{postgres_server.port}/", ":1/")
    config = LakeConfig(closed, str(tmp_path / "data"))
    with pytest.raises(LakeConfigError) as raised:
        connect_lake(config)
    message = str(raised.value)
    assert "cannot open the DuckLake catalog postgresql://attn:***@127.0.0.1:1/nowhere" in message
    assert "attn-test-pw" not in message and "Connection refused" in message
    assert not any((tmp_path / "data").iterdir())  # the data path was checked, nothing written


def test_a_missing_extension_package_is_named_with_the_pip_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "duckdb_extension_sqlite_scanner" else find_spec(name, *a),
    )
    with pytest.raises(LakeConfigError) as raised:
        connect_lake(LakeConfig(str(tmp_path / "catalog.sqlite"), str(tmp_path / "data")))
    assert "extension `sqlite_scanner`, from the pip package duckdb-extension-sqlite-scanner" in str(raised.value)
    assert f"pip install 'duckdb-extension-sqlite-scanner=={duckdb.__version__}'" in str(raised.value)
    assert not (tmp_path / "catalog.sqlite").exists()


def test_wrong_s3_credentials_fail_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    server = start_s3_process(check_credentials=True)
    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        with pytest.raises(LakeConfigError) as raised:
            connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), "s3://bucket/lake"))
    finally:
        server.stop()
    message = str(raised.value)
    assert message.startswith("the DuckLake data path s3://bucket/lake/ cannot be used: ")
    assert "403" in message and "AWS_ACCESS_KEY_ID" in message
    assert not (tmp_path / "catalog.ducklake").exists()


def test_a_data_path_that_is_not_writable_fails_before_anything_is_written(tmp_path: Path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(LakeConfigError) as raised:
        connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "a-file" / "data")))
    assert f"the DuckLake data path {tmp_path / 'a-file' / 'data'}/ is not writable (Not a directory)" in str(
        raised.value
    )
    assert not (tmp_path / "catalog.ducklake").exists()


def test_registration_sets_up_a_new_lake_and_unchanged_models_write_nothing(tmp_path: Path):
    with connect_lake(LakeConfig(str(tmp_path / "catalog.ducklake"), str(tmp_path / "data"))) as conn:
        with pytest.raises(LakeNotSetUpError, match="materialize `warehouse_views` once"):
            replace_partition(conn, {"head_summaries": _summaries([0.5])}, SPEC.model_id, "demo")
        upsert_model(conn, SPEC)  # creates and partitions the tables first: registration precedes the views
        snapshots = "SELECT count(*) FROM ducklake_snapshots('lake')"
        (before,) = conn.execute(snapshots).fetchone()
        upsert_model(conn, SPEC)
        assert conn.execute(snapshots).fetchone() == (before,)
        upsert_model(conn, ModelSpec("org--m", "org/m", "/x", "r2", "bert", 1, 2, True))
        assert conn.execute("SELECT revision FROM models").fetchall() == [("r2",)]
        partitioned = conn.execute(
            "SELECT count(DISTINCT table_id) FROM __ducklake_metadata_lake.ducklake_partition_info"
        ).fetchone()
        assert partitioned == (len(PARTITIONED_TABLES) + 1,)  # every partitioned table and `batches`


@pytest.mark.parametrize(
    ("catalog", "kind"),
    [
        ("dbname=lake host=db.internal user=attn password=secret", "postgres"),
        ("  host=/var/run/postgresql dbname=lake", "postgres"),
        ("postgresql://attn:secret@db/lake", "postgres"),
        ("lake.sqlite", "sqlite"),
        ("lake.ducklake", "duckdb"),
        ("hostname=x.ducklake", "duckdb"),  # a file whose name holds a `=`, not a libpq keyword
    ],
)
def test_a_libpq_key_value_catalog_is_postgresql_not_a_file(catalog: str, kind: str) -> None:
    config = LakeConfig(catalog, "/data")
    assert config.catalog_kind == kind
    if kind == "postgres":
        assert config.metadata_path() == f"postgres:{catalog}" and not config.catalog_missing()
        assert "secret" not in config.describe() and "secret" not in repr(config)


def test_a_lake_on_a_libpq_key_value_catalog(tmp_path: Path, postgres_server, monkeypatch: pytest.MonkeyPatch):
    """ATTN_LAKE_CATALOG="dbname=… host=… port=… user=… password=…", as libpq and psql take it: the lake
    is created on that database, no file of that name in the working directory."""
    database = postgres_server.create_database()
    monkeypatch.chdir(tmp_path)
    server = f"host=127.0.0.1 port={postgres_server.port}"
    dsn = f"dbname={database} {server} user={POSTGRES_USER} password={POSTGRES_PASSWORD}"
    config = LakeConfig(dsn, str(tmp_path / "data"))
    with connect_lake(config) as conn:
        apply_views(conn)
        upsert_model(conn, SPEC)
        replace_partition(conn, {"head_summaries": _summaries([0.25, 0.75])}, SPEC.model_id, "demo")
    with connect_lake(config, read_only=True) as reader:
        assert reader.execute("SELECT model, to_cls FROM clark_special_tokens").fetchall() == [
            ("org/m", pytest.approx(0.5))
        ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data"]  # no catalog file named after the DSN
