"""A real HTTP server on 127.0.0.1 serving a folder as a corpus mirror, for the `attn-warehouse data`
tests: it answers Range requests (206), and can cut a file's response short after a given number of
bytes (a dropped connection), recording every request."""

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


class MirrorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, cuts: dict[str, list[int]], ranges: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.cuts = cuts  # path -> bytes sent before the connection drops, one entry per request
        self.ranges = ranges
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/"


class _Handler(BaseHTTPRequestHandler):
    server: MirrorServer

    def do_GET(self) -> None:
        name = unquote(urlparse(self.path).path).lstrip("/")
        self.server.requests.append((name, self.headers.get("Range")))
        path = self.server.root / name
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        wanted = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        start = int(wanted.group(1)) if wanted and self.server.ranges else 0
        if start >= len(data) > 0:
            self.send_error(416)
            return
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        cuts = self.server.cuts.get(name)
        self.wfile.write(data[start : start + cuts.pop(0)] if cuts else data[start:])

    def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows failures' output
        pass


@contextmanager
def serving(root: Path, cuts: dict[str, list[int]] | None = None, ranges: bool = True) -> Iterator[MirrorServer]:
    """`root` served over HTTP on a free port of 127.0.0.1 until the block ends; `cuts` drops the
    connection of a file's next requests after so many bytes; `ranges=False`: Range is ignored."""
    server = MirrorServer(root, dict(cuts or {}), ranges)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
