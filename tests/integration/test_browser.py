"""Real-browser checks: the static report and the Dagster UI, rendered by headless Chromium.

One tiny warehouse (the demo pipeline with a 2 x 4 random BERT, no HTA) serves both: the
report is opened from disk, and `dagster dev` is started on loopback over the same
Dagster instance and warehouse.
"""

import base64
import dataclasses
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest
from dagster import AssetSelection, DagsterInstance, materialize

from dagster_project import settings
from dagster_project.compute.models import inspect_model
from dagster_project.defs.assets import (
    all_assets,
    corpus_assets_by_name,
    encoder_model,
    fact_assets_by_corpus,
    paper_report,
    warehouse_views,
)
from dagster_project.defs.assets.charts import chart_assets_by_name
from dagster_project.defs.registration import register_model
from dagster_project.presentation.chart_registry import CHARTS
from dagster_project.presentation.charts.common import PAPER_COLOUR
from dagster_project.storage.claims import load_claims
from dagster_project.storage.model_rows import upsert_model
from tests.runs import materialize_model, run_resources
from tests.servers import ServerUnavailable, free_port, wait_until_ready
from tests.tiny_models import TINY_HEADS, TINY_LAYERS

CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH (Debian: `apt-get install chromium`; .ci/run installs it)"
)
# Tall enough for the first model's whole Clark section: the notes above the charts quote the
# model's path, so how far down the first chart starts depends on the machine's folder names.
SCREEN = (1200, 2400)
# The charts the demo corpus can feed without HTA or other analyses; the others must show a note.
# Charts of the demo attention facts; those reading other tables (head matches need a second model's
# facts) are covered by their own tests.
DEMO_CHARTS = [spec for spec in CHARTS if "demo" in spec.corpora and spec.analysis == "attention" and not spec.reads]


def run_chromium(profile: Path, *args: str, budget_ms: int = 2000) -> subprocess.CompletedProcess:
    """Headless Chromium with its own profile folder (no sandbox, since tests may run as root),
    acting after the page's scripts ran and its images decoded for `budget_ms` of virtual time."""
    command = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={budget_ms}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)


def dump_dom(profile: Path, url: str, budget_ms: int = 2000) -> str:
    return run_chromium(profile, "--dump-dom", url, budget_ms=budget_ms).stdout


def screenshot(profile: Path, url: str, path: Path) -> bytes:
    run_chromium(profile, f"--window-size={SCREEN[0]},{SCREEN[1]}", "--hide-scrollbars", f"--screenshot={path}", url)
    return path.read_bytes()


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG as a (height, width, channels) array, undoing the per-row
    filters of the PNG spec (no imaging library is installed)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, compressed = 8, bytearray()
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            compressed += body
        position += 12 + length
    assert depth == 8 and color in (2, 6), f"unsupported PNG: depth {depth}, color type {color}"
    channels = 3 if color == 2 else 4
    stride = width * channels
    filtered = np.frombuffer(zlib.decompress(bytes(compressed)), np.uint8).reshape(height, 1 + stride)
    image = np.zeros((height, stride), np.uint8)
    previous = np.zeros(stride, np.int64)
    for y, (kind, row) in enumerate(zip(filtered[:, 0], filtered[:, 1:].astype(np.int64))):
        if kind == 0:
            current = row
        elif kind == 1:  # Sub: each byte adds the reconstructed byte one pixel left
            current = np.cumsum(row.reshape(width, channels), axis=0).ravel() % 256
        elif kind == 2:  # Up
            current = (row + previous) % 256
        else:  # Average or Paeth: sequential along the row
            current, up, left_row = row.tolist(), previous.tolist(), [0] * channels
            for x in range(stride):
                left = current[x - channels] if x >= channels else 0
                upper_left = up[x - channels] if x >= channels else 0
                if kind == 3:
                    predictor = (left + up[x]) // 2
                else:
                    estimate = left + up[x] - upper_left
                    distances = (abs(estimate - left), abs(estimate - up[x]), abs(estimate - upper_left))
                    predictor = (left, up[x], upper_left)[distances.index(min(distances))]
                current[x] = (current[x] + predictor) % 256
            del left_row
            current = np.array(current, np.int64)
        image[y] = current
        previous = current
    return image.reshape(height, width, channels)


def paper_label_height(image: np.ndarray) -> int:
    """The most consecutive pixel rows of a chart image that hold the paper marks' colour: a dashed
    rule takes one or two, a line of label text several."""
    colour = np.array([int(PAPER_COLOUR[index : index + 2], 16) for index in (1, 3, 5)])
    rows = (np.abs(image[..., :3].astype(int) - colour).max(axis=-1) <= 40).any(axis=1)
    longest = run = 0
    for found in rows:
        run = run + 1 if found else 0
        longest = max(longest, run)
    return longest


@pytest.fixture(scope="module")
def demo_home(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A Dagster instance folder, warehouse and chart folder after the demo pipeline (no HTA)
    and the report; a second model is registered without data, to exercise the selector."""
    root = tmp_path_factory.mktemp("browser")
    home = root / "dagster_home"
    home.mkdir()
    resources = run_resources(root)
    with DagsterInstance.local_temp(str(home)) as instance:
        spec = register_model(str(tiny_model_dir), instance, resources["warehouse"])
        other = dataclasses.replace(
            inspect_model(str(tiny_model_dir)), model_id="zz-unmaterialized", source="zz/unmaterialized"
        )
        with resources["warehouse"].get_connection() as conn:
            upsert_model(conn, other)
        assert materialize([warehouse_views], instance=instance, resources=resources).success
        charts = [chart_assets_by_name[spec.name] for spec in DEMO_CHARTS]
        demo = [encoder_model, corpus_assets_by_name["demo"], fact_assets_by_corpus["demo"], *charts]
        materialize_model(demo, spec.model_id, instance, resources)
        assert materialize(
            all_assets, selection=AssetSelection.assets(paper_report), instance=instance, resources=resources
        ).success
    return {"root": root, "home": home, "model_id": spec.model_id, "other_id": other.model_id, "resources": resources}


@pytest.mark.usefixtures("dagster_server")  # started early, to boot while the report is checked
def test_report_pages_render_charts_selector_and_headlines(demo_home: dict, tmp_path: Path):
    report = demo_home["root"] / "charts" / "report"
    papers = {spec.paper for spec in CHARTS}
    assert {page.stem for page in report.glob("*.html")} == {"index", "kovaleva"} | papers
    model_id, other_id = demo_home["model_id"], demo_home["other_id"]
    with duckdb.connect(demo_home["resources"]["warehouse"].database, read_only=True) as conn:
        drawn = {spec.name for spec in CHARTS if spec.rows(conn, model_id) is not None}
        # Headline: the largest mean attention to [SEP] of any head, per layer, from the view.
        to_sep = conn.execute(
            "SELECT layer, max(to_sep) FROM clark_special_tokens WHERE model_id = ? AND corpus = 'demo' "
            "GROUP BY layer ORDER BY layer",
            [model_id],
        ).fetchall()
    # A chart is drawn where its view has rows for the model (at least the charts materialized
    # above; other engineers' charts may read the demo facts too), a note elsewhere.
    assert {spec.name for spec in DEMO_CHARTS} <= drawn

    def block(spec):
        if spec.name in drawn:
            return f'<figure data-chart="{spec.name}">'
        return f'<p class="missing" data-chart="{spec.name}"'  # a chart the model cannot have adds data-needs

    index = dump_dom(tmp_path / "profile", (report / "index.html").as_uri())
    assert all(f'href="{paper}.html"' in index for paper in papers)
    assert model_id in index and other_id in index
    # The first page is the scorecard: every claim per model, the first model's shown; the demo run
    # fills none of the papers' corpora, so each claim is missing and says what it needs.
    assert index.index("Scorecard: does each paper") < index.index("<h2>Models</h2>")
    shown = index.split(f'<section class="model" data-model="{other_id}" hidden="">')[0]
    assert shown.count('<tr class="verdict-') == len(load_claims())
    assert '<tr class="verdict-missing" data-claim="clark_sep_layers_6_10">' in shown
    assert "needs attention facts on wiki_segments (attn-warehouse run --corpus wiki_segments)" in shown

    dom = dump_dom(tmp_path / "profile", (report / "clark.html").as_uri())
    assert '<select id="model-select">' in dom
    assert f'<option value="{model_id}">' in dom and f'<option value="{other_id}">' in dom
    # The script showed the first model's section and hid the other one.
    assert f'<section class="model" data-model="{model_id}">' in dom
    assert f'<section class="model" data-model="{other_id}" hidden="">' in dom
    shown = dom.split(f'data-model="{other_id}"')[0]
    clark = [spec for spec in CHARTS if spec.paper == "clark"]
    assert shown.count('src="data:image/png;base64,') == sum(spec.name in drawn for spec in clark) > 0
    assert all(block(spec) in shown for spec in clark)
    assert len(to_sep) == TINY_LAYERS
    assert all(f"<td>{layer}</td><td>{value:.3f}</td>" in shown for layer, value in to_sep)
    # The paper's number beside the model's: Clark's 0.5 on [SEP] in layers 6-10, in the headline
    # table at the tiny model's last layer (BERT-base layer ceil(12 * 1.5 / 2) = 9), and drawn with
    # its label on the Fig. 2 chart (a label's glyphs take several pixel rows in the paper colour).
    assert "<th>paper: mean attention to [SEP] over heads</th>" in shown
    figure = shown.split('<figure data-chart="clark_fig2_special_tokens">')[1]
    fig2 = decode_png(base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', figure)[1]))
    assert paper_label_height(fig2) >= 5

    # The hash picks a model; the unmaterialized one shows what to run instead of charts.
    dom = dump_dom(tmp_path / "profile", (report / "pascual.html").as_uri() + f"#{other_id}")
    assert f'<section class="model" data-model="{model_id}" hidden="">' in dom
    other = dom.split(f'data-model="{other_id}"')[1]
    assert "data:image/png" not in other
    assert other.count('class="missing"') == sum(spec.paper == "pascual" for spec in CHARTS)
    assert "run <code>attn-warehouse run zz/unmaterialized --corpus xnli_en --hta</code>" in other
    shown = dom.split(f'data-model="{other_id}"')[0]
    pascual = [spec for spec in CHARTS if spec.paper == "pascual"]
    assert all(block(spec) in shown for spec in pascual)

    image = decode_png(screenshot(tmp_path / "profile", (report / "clark.html").as_uri(), tmp_path / "clark.png"))
    assert image.shape[:2] == (SCREEN[1], SCREEN[0])
    pixels = image[..., :3].astype(int)
    assert pixels.std() > 10 and (pixels[0, 0] == 255).all()  # not blank; the page's white background
    # Marks in Vega's first category colours (blue #4c78a8, red #e45756): the chart images rendered.
    marks = [int((np.abs(pixels - colour).max(axis=-1) <= 10).sum()) for colour in ((76, 120, 168), (228, 87, 86))]
    assert min(marks) > 20, f"pixels in blue and red: {marks}"


# The UI must not launch runs of its own (the registry sensor would start MiniLM analyses):
# a queue that admits none.
NO_RUNS_INSTANCE = """run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 0
"""


@pytest.fixture(scope="module")
def dagster_server(
    demo_home: dict, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """`dagster dev` on loopback over the demo instance and warehouse, not waited for: it
    boots (half a minute) while the report is checked. Yields its URL, process and log."""
    root, home = demo_home["root"], demo_home["home"]
    scratch = tmp_path_factory.mktemp("dagster-dev")
    (home / "dagster.yaml").write_text(NO_RUNS_INSTANCE)
    env = os.environ | {
        "DAGSTER_HOME": str(home),
        "ATTN_WAREHOUSE": demo_home["resources"]["warehouse"].database,
        "ATTN_CHARTS_DIR": str(root / "charts"),
        "ATTN_DATA_DIR": str(root / "no-data"),
        "ATTN_MODELS_REGISTRY": str(scratch / "models.toml"),  # none: the sensor registers nothing
        "ATTN_MODELS_CACHE": str(scratch / "models_cache"),
        # Its temporary workspace file too: killed, it cannot remove it, and pytest's folder goes.
        "TMPDIR": str(scratch),
    }
    port = free_port()
    log_path = scratch / "dagster_dev.log"
    command = [
        str(Path(sys.executable).with_name("dagster")),
        "dev",
        "-w",
        str(settings.PROJECT_ROOT / "workspace.yaml"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with log_path.open("w") as log:
        server = subprocess.Popen(
            command, cwd=settings.PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield f"http://127.0.0.1:{port}", server, log_path
    finally:
        # The whole process group (webserver, daemon, code server); dagster dev takes long to
        # honour SIGTERM and nothing it holds needs a clean shutdown here (its files are in scratch).
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


LOCATIONS_QUERY = """{ workspaceOrError { ... on Workspace { locationEntries {
    loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def code_location_error(url: str) -> str | None:
    """None while the server is not ready (it answers before its code location is loaded),
    "" once the code location is loaded, and the load error when it failed."""
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": LOCATIONS_QUERY}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            entries = json.load(response)["data"]["workspaceOrError"]["locationEntries"]
    except (OSError, KeyError, TypeError, ValueError):
        return None
    if not entries or any(entry["loadStatus"] != "LOADED" for entry in entries):
        return None
    return "\n".join(entry["locationOrLoadError"].get("message", "") for entry in entries)


@pytest.fixture
def dagster_ui(dagster_server: tuple[str, subprocess.Popen, Path]) -> str:
    """The server's base URL once its code location is loaded (the wait stretches with the
    machine's load: tests/servers.py wait_until_ready)."""
    url, server, log_path = dagster_server
    try:
        error = wait_until_ready(
            lambda: code_location_error(url),
            what=f"dagster dev on {url} (its code location loaded)",
            quiet_seconds=120,
            process=server,
            log=log_path,
        )
    except ServerUnavailable as unavailable:
        pytest.fail(str(unavailable))
    if error:
        pytest.fail(f"dagster dev could not load the definitions: {error}")
    return url


def metadata_value(dom: str, key: str) -> str | None:
    """The rendered value of a metadata entry in the UI's metadata table."""
    found = re.search(rf">{key}</span></div></td><td[^>]*>(.*?)</td>", dom, re.S)
    return None if found is None else re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


def test_dagster_ui_shows_the_graph_charts_and_row_counts(demo_home: dict, dagster_ui: str, tmp_path: Path):
    profile = tmp_path / "profile"
    graph = dump_dom(profile, f"{dagster_ui}/asset-groups", budget_ms=15000)
    assert "Global asset lineage" in graph
    assert all(f">{group}<" in graph for group in ("models", "corpora", "facts", "views", "charts"))

    facts = dump_dom(profile, f"{dagster_ui}/assets/demo_attention_facts?view=events", budget_ms=15000)
    assert f"Partition {demo_home['model_id']}" in re.sub(r"<[^>]+>", "", facts)
    assert metadata_value(facts, "examples") == "24"
    assert metadata_value(facts, "head_summaries_rows") == str(24 * TINY_LAYERS * TINY_HEADS)

    chart = dump_dom(profile, f"{dagster_ui}/assets/{DEMO_CHARTS[0].name}?view=events", budget_ms=15000)
    assert metadata_value(chart, "chart") == "[Show Markdown]"  # the PNG, behind the UI's markdown toggle
    assert metadata_value(chart, "corpus") == "demo"
    assert metadata_value(chart, "view_rows") == str(TINY_LAYERS * TINY_HEADS)  # one row per head

    report = dump_dom(profile, f"{dagster_ui}/assets/paper_report?view=events", budget_ms=15000)
    assert metadata_value(report, "models") == "2"
    assert metadata_value(report, "charts_drawn") == str(len(DEMO_CHARTS))
