"""Where the project keeps things. Every location can be moved with an environment variable."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = PROJECT_ROOT / "sql"


def _env_path(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default).expanduser().resolve()


def warehouse_path() -> Path:
    """The DuckDB file (ATTN_WAREHOUSE)."""
    return _env_path("ATTN_WAREHOUSE", PROJECT_ROOT / "warehouse.duckdb")


def data_dir() -> Path:
    """Root of the corpora (ATTN_DATA_DIR); the layout is that of ../shared/data."""
    return _env_path("ATTN_DATA_DIR", PROJECT_ROOT.parent / "shared" / "data")


def charts_dir() -> Path:
    """Where chart HTML/PNG files are written (ATTN_CHARTS_DIR)."""
    return _env_path("ATTN_CHARTS_DIR", PROJECT_ROOT / "charts")


def models_cache_dir() -> Path:
    """Hugging Face weights cache (ATTN_MODELS_CACHE)."""
    return _env_path("ATTN_MODELS_CACHE", PROJECT_ROOT / "models_cache")


def dagster_home() -> Path:
    """Instance directory holding run history and the dynamic model partitions."""
    return _env_path("DAGSTER_HOME", PROJECT_ROOT / ".dagster")


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
