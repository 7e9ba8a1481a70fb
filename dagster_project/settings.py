"""Where the project keeps things. Every location can be moved with an environment variable.

A user's files (warehouse, charts, models cache, run history, models registry) default to one
home folder: ATTN_HOME, else the working directory, never the install location. What the project
ships (sql/ and the starter files `attn-warehouse init` writes) is read from the package in a
wheel and from the repository's top level in a clone or an editable install.
"""

import os
from pathlib import Path

from platformdirs import user_data_path

PACKAGE_DIR = Path(__file__).resolve().parent
# The repository's top level (docs/, tests/, deploy/); a wheel has none of them.
PROJECT_ROOT = PACKAGE_DIR.parent
# setup.py copies sql/ and the starter files into the wheel's package as shipped/; a clone and an
# editable install keep them at the repository's top level.
SHIPPED_DIR = PACKAGE_DIR / "shipped" if (PACKAGE_DIR / "shipped").is_dir() else PROJECT_ROOT
SQL_DIR = SHIPPED_DIR / "sql"
# The starter files `attn-warehouse init` writes into the home folder.
STARTER_FILES = ("models.toml", "workspace.yaml")
# The instance settings (the writers' pool, run monitoring) every new Dagster home starts from, copied
# there as dagster.yaml: outside .dagster/, a clone's own run history, which a user may clear.
INSTANCE_SETTINGS = SHIPPED_DIR / "dagster_instance.yaml"


def _env_path(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default).expanduser().resolve()


def home() -> Path:
    """The folder a user's files default to (ATTN_HOME, else the working directory)."""
    return _env_path("ATTN_HOME", Path.cwd())


def warehouse_path() -> Path:
    """The DuckDB file (ATTN_WAREHOUSE, default warehouse.duckdb in the home folder)."""
    return _env_path("ATTN_WAREHOUSE", home() / "warehouse.duckdb")


def data_dir() -> Path:
    """Root of the corpora, laid out like ../shared/data (ATTN_DATA_DIR): by default ../shared/data
    beside the home folder where there is one (a checkout's), else the user's data folder that
    `attn-warehouse data fetch` fills (platformdirs: ~/.local/share/attention-warehouse/corpora on Linux)."""
    shared = home().parent / "shared" / "data"
    return _env_path("ATTN_DATA_DIR", shared if shared.is_dir() else user_data_path("attention-warehouse") / "corpora")


def charts_dir() -> Path:
    """Where chart HTML/PNG files are written (ATTN_CHARTS_DIR, default charts/ beside the warehouse)."""
    return _env_path("ATTN_CHARTS_DIR", warehouse_path().parent / "charts")


def models_cache_dir() -> Path:
    """Hugging Face weights cache (ATTN_MODELS_CACHE, default models_cache/ in the home folder)."""
    return _env_path("ATTN_MODELS_CACHE", home() / "models_cache")


def dagster_home() -> Path:
    """Instance directory holding run history and the dynamic model partitions (DAGSTER_HOME,
    default .dagster/ beside the warehouse, so a warehouse moved by ATTN_WAREHOUSE keeps its own)."""
    return _env_path("DAGSTER_HOME", warehouse_path().parent / ".dagster")


def compute_device() -> str:
    """Where the passes compute (ATTN_DEVICE): auto (default: cuda, else mps, else cpu), cpu, cuda, cuda:N, mps."""
    return os.environ.get("ATTN_DEVICE", "").strip() or "auto"


def compute_dtype() -> str:
    """Forward dtype of forward-only passes (ATTN_DTYPE): float32 (default), bfloat16, float16."""
    return os.environ.get("ATTN_DTYPE", "").strip() or "float32"


def source_repository() -> tuple[str, str] | None:
    """The repository host page of this code (ATTN_GIT_URL, e.g. https://github.com/org/repo, on
    GitHub or GitLab) and its branch (ATTN_GIT_BRANCH, default main); None when unset. The Dagster
    UI then links each asset to its code there instead of to the local file."""
    url = os.environ.get("ATTN_GIT_URL", "").strip().rstrip("/")
    return (url, os.environ.get("ATTN_GIT_BRANCH", "").strip() or "main") if url else None
