"""The docs site for the browser tests: built once with `mkdocs build --strict` and no repository
host configured, and served on a loopback port (the theme's search runs in a worker, which a page
opened from disk may not start)."""

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from dagster_project.settings import PROJECT_ROOT


def build_site(site: Path) -> Path:
    """The site as `mkdocs build --strict` writes it into `site` with no repository host configured."""
    env = {name: value for name, value in os.environ.items() if name not in ("ATTN_GIT_URL", "ATTN_GIT_BRANCH")}
    mkdocs = Path(sys.executable).with_name("mkdocs")
    subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "-d", str(site)],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        timeout=600,
    )
    return site


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves files without logging each request."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@contextmanager
def serving(site: Path, handler: type[SimpleHTTPRequestHandler] = QuietHandler) -> Iterator[str]:
    """`site` served by `handler` on 127.0.0.1 while the block runs; yields its URL (no trailing /)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
