"""The docs site at 1280 px, in headless Chromium: on the scorecard, a paper page (Clark) and the
results catalogue, no table is wider than its content column, folded blocks opened, so that a
reader never scrolls a table sideways (the verdict tables give each reason a row of its own:
presentation/docs_snapshot.py). The site is built with mkdocs and served on loopback; a probe
script, added to each page as it is served, measures the tables once the theme's scripts have
wrapped them. A screenshot of each page lands in the test's folder (kept where the test fails:
pytest's tmp_path_retention_policy)."""

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs_site import QuietHandler, serving
from tests.integration.test_browser import CHROMIUM, run_chromium

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: `apt-get install chromium`)"),
]
# A laptop's browser window: wide enough for the theme's two sidebars, which leave the content
# column about 690 px.
WIDTH = 1280
PAGES = ("papers/scorecard/", "papers/clark/", "catalogue/")
# Opens every folded block, then writes each table's width and its room (its parent's width, which
# the theme keeps within the column) into the page as JSON.
PROBE = b"""<script>
addEventListener("load", () => setTimeout(() => {
  document.querySelectorAll("details").forEach((folded) => { folded.open = true; });
  const column = document.querySelector("article.md-content__inner");
  const tables = [...column.querySelectorAll("table")].map((table) => ({
    width: table.scrollWidth,
    room: Math.min(table.parentElement.clientWidth, column.clientWidth),
    head: table.rows[0].innerText.replace(/\\s+/g, " ").slice(0, 80),
  }));
  const out = document.createElement("pre");
  out.id = "table-widths";
  out.textContent = JSON.stringify({viewport: innerWidth, column: column.clientWidth, tables});
  document.body.append(out);
}, 500));
</script>"""


class ProbingHandler(QuietHandler):
    """Serves the built site, each HTML page with PROBE at the end of its body."""

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path /= "index.html"
        if path.suffix != ".html" or not path.is_file():
            super().do_GET()
            return
        body = path.read_bytes().replace(b"</body>", PROBE + b"</body>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def docs_site(built_site: Path) -> Iterator[str]:
    """The built site served on a loopback port, each page with PROBE; yields its URL."""
    with serving(built_site, ProbingHandler) as url:
        yield url + "/"


@pytest.mark.parametrize("page", PAGES)
def test_no_table_is_wider_than_the_content_column(docs_site: str, page: str, tmp_path: Path) -> None:
    url = docs_site + page
    dom = run_chromium(tmp_path / "profile", f"--window-size={WIDTH},900", "--dump-dom", url, budget_ms=5000).stdout
    found = re.search(r'<pre id="table-widths">(.*?)</pre>', dom, re.DOTALL)
    assert found, f"the probe did not run on {url}"
    measured = json.loads(html.unescape(found[1]))
    assert measured["viewport"] == WIDTH
    assert 600 < measured["column"] < 800, measured["column"]  # both sidebars shown: the column they leave
    assert measured["tables"], f"no table on {url}"
    wide = [table for table in measured["tables"] if table["width"] > table["room"]]
    shot = tmp_path / f"{page.strip('/').replace('/', '-')}.png"
    run_chromium(tmp_path / "profile", f"--window-size={WIDTH},2400", "--hide-scrollbars", f"--screenshot={shot}", url)
    assert shot.stat().st_size > 0
    assert wide == [], f"{len(wide)} of {len(measured['tables'])} tables on {page} overflow (screenshot {shot})"
