"""The docs site as a reader without the internet gets it: mkdocs builds it (strict, no repository
host configured), a server on 127.0.0.1 serves it, and headless Chromium, driven over the DevTools
protocol, opens its pages with every other host unreachable."""

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagster_project.corpora.manifest import sha256_of
from dagster_project.settings import PROJECT_ROOT
from tests.docs_site import serving
from tests.integration.test_browser import CHROMIUM
from tests.unit.test_github_view import github_view

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH (Debian: `apt-get install chromium`; .ci/run installs it)"
)
# The network off: no host name resolves but the loopback address, and whatever is not loopback
# (an address written as numbers) goes to a proxy port where nothing listens.
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=127.0.0.1:9")
MERMAID_BLOCK = re.compile(r"^```mermaid$", re.MULTILINE)


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    """The built site served on 127.0.0.1."""
    with serving(built_site) as url:
        yield url


class DevTools:
    """Headless Chromium driven over the DevTools protocol on a pipe (Chromium reads commands on
    its file descriptor 3 and answers on 4, each message JSON ending in a NUL byte)."""

    def __init__(self, profile: Path, *flags: str) -> None:
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def on_descriptors_3_and_4() -> None:
            os.dup2(commands_read, 3)
            os.dup2(answers_write, 4)

        self._process = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
            + [f"--user-data-dir={profile}", "--remote-debugging-pipe", *flags, "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=on_descriptors_3_and_4,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._pending = b""
        self._last_id = 0
        self.events: list[dict] = []

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._pending:
                raw, self._pending = self._pending.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") != self._last_id:
                    self.events.append(answer)
                elif "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                else:
                    return answer["result"]
            ready, _, _ = select.select([self._answers], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"Chromium did not answer {method} within {timeout} s")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe during {method}")
            self._pending += chunk

    def open(self, url: str) -> str:
        """A new tab recording its network requests, at `url`; returns its session."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Network.enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        return session

    def requested_urls(self) -> set[str]:
        return {
            event["params"]["request"]["url"]
            for event in self.events
            if event.get("method") == "Network.requestWillBeSent"
        }

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._commands)
        os.close(self._answers)


@pytest.fixture
def offline_browser(tmp_path: Path) -> Iterator[DevTools]:
    browser = DevTools(tmp_path / "profile", *OFFLINE)
    try:
        yield browser
    finally:
        browser.close()


def shadow_svgs(node: dict, in_shadow: bool = False) -> list[dict]:
    """The <svg> elements inside shadow roots (the theme draws each diagram in a closed one) of a
    DOM.getDocument tree."""
    found = [node] if in_shadow and node.get("nodeName") == "svg" else []
    for child in node.get("children", []):
        found += shadow_svgs(child, in_shadow)
    for root in node.get("shadowRoots", []):
        found += shadow_svgs(root, True)
    return found


def descendants(node: dict) -> Iterator[dict]:
    for child in node.get("children", []):
        yield child
        yield from descendants(child)


def classes(node: dict) -> list[str]:
    """The class names of a DOM.getDocument element (its attributes are a flat name, value list)."""
    attributes = node.get("attributes", [])
    return dict(zip(attributes[::2], attributes[1::2])).get("class", "").split()


@needs_chromium
def test_the_architecture_diagrams_draw_with_the_network_off(site_url: str, offline_browser: DevTools) -> None:
    diagrams = len(MERMAID_BLOCK.findall((PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")))
    assert diagrams >= 2
    session = offline_browser.open(f"{site_url}/architecture/")
    deadline = time.monotonic() + 60
    while True:
        document = offline_browser.call("DOM.getDocument", {"depth": -1, "pierce": True}, session=session)["root"]
        svgs = shadow_svgs(document)
        if len(svgs) >= diagrams or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(svgs) == diagrams, f"{len(svgs)} of {diagrams} diagrams drawn as SVG"
    # Drawn, not an error picture: each has its boxes (mermaid's <g class="node ...">).
    for svg in svgs:
        boxes = [
            element for element in descendants(svg) if element.get("nodeName") == "g" and "node" in classes(element)
        ]
        assert len(boxes) >= 3
    # Nothing was asked of another host (mermaid, fonts): everything came from the site.
    outside = {url for url in offline_browser.requested_urls() if not url.startswith((site_url + "/", "data:"))}
    assert outside == set()


def test_with_no_repository_configured_the_site_shows_the_linked_files_itself(built_site: Path) -> None:
    clark = (built_site / "papers" / "clark" / "index.html").read_text(encoding="utf-8")
    assert 'data-md-component="source"' not in clark  # the header's repository button
    assert 'href="../../source/sql/results/clark_special_tokens.sql/"' in clark
    assert not re.search(r'href="https?://[^"]*/blob/', clark)
    shown = (built_site / "source" / "sql" / "results" / "clark_special_tokens.sql" / "index.html").read_text()
    assert "<code>sql/results/clark_special_tokens.sql</code>" in shown
    assert '<span class="n">int_head_attention_means</span>' in shown  # the view's FROM, highlighted


def test_the_site_serves_the_pinned_mermaid(built_site: Path) -> None:
    """The build put mermaid where the diagram pages load it, the pinned file byte for byte."""
    served = built_site / github_view.MERMAID_SCRIPT
    assert sha256_of(served) == github_view.MERMAID.sha256
    assert served.stat().st_size == 3_572_661
