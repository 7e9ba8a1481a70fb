from pathlib import Path

import pytest

from tests.docs_site import build_site


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once per test process (tests/docs_site.py)."""
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -c constraints.txt -e '.[docs]'")
    return build_site(tmp_path_factory.mktemp("site"))
