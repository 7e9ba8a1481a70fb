"""Real servers for tests, started by the tests: PostgreSQL from the machine's binaries (Debian's
`postgresql` package) in a temporary directory, and an S3 endpoint from moto's threaded server.
Both listen on a free port of 127.0.0.1 and are stopped by the caller (the fixtures in
tests/conftest.py). No mocks: DuckLake and the Dagster instance talk to them over the network.

Start-ups wait for a readiness signal (wait_until_ready) with a deadline counted in quiet-machine
seconds: on a loaded machine (load average above the core count) the wait stretches with the load,
so a busy 2-core machine does not fail a test whose server is merely slow to boot."""

import glob
import logging
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

POSTGRES_USER = "attn"
POSTGRES_PASSWORD = "attn-test-pw"
# Debian's postgresql package keeps pg_ctl and initdb off PATH, under /usr/lib/postgresql/<major>/bin.
_DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"
# A start-up waits at most this many times its quiet-machine deadline, however loaded the machine.
MAX_STRETCH = 8.0

Ready = TypeVar("Ready")


class ServerUnavailable(RuntimeError):
    """A server could not be started here; the message says why (tests skip with it)."""


def load_factor() -> float:
    """How many times more runnable work the machine has than cores (1-minute load average over
    the core count), at least 1: a quiet machine is 1, 2 cores at load 8 are 4."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def stretched(seconds: float) -> float:
    """A timeout of `seconds` on a quiet machine, stretched by the load now (at most MAX_STRETCH)."""
    return seconds * min(load_factor(), MAX_STRETCH)


def wait_until_ready(
    ready: Callable[[], Ready | None],
    *,
    what: str,
    quiet_seconds: float,
    process: subprocess.Popen | None = None,
    log: Path | None = None,
    interval: float = 0.5,
) -> Ready:
    """Poll `ready()` until it returns something other than None, and return that. Each wall
    second counts 1 / load_factor() quiet seconds, so the deadline (`quiet_seconds`) stretches
    with the load measured while waiting, up to MAX_STRETCH times. Raises ServerUnavailable at
    once when `process` exits, or at the deadline, saying what was awaited, for how long, the
    load average and the end of `log`."""
    start = previous = time.monotonic()
    counted = 0.0
    while (value := ready()) is None:
        now = time.monotonic()
        counted += (now - previous) / load_factor()
        previous = now
        exited = process is not None and process.poll() is not None
        if exited or counted > quiet_seconds or now - start > quiet_seconds * MAX_STRETCH:
            cause = f"exited with code {process.returncode}" if exited else "timed out"
            tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
            raise ServerUnavailable(
                f"{what} was not ready: {cause} after {now - start:.1f} s (deadline {quiet_seconds:g} s on a quiet "
                f"machine, at most {MAX_STRETCH:.0f}x that under load; load average now "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)" + (f"; log {log}:\n{tail}" if log else "")
            )
        time.sleep(interval)
    return value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_binaries() -> Path | None:
    """The folder holding pg_ctl and initdb: on PATH, else Debian's versioned folder; None when absent."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    folders = sorted(glob.glob(_DEBIAN_BINARIES), key=lambda path: int(Path(path).parent.name), reverse=True)
    return next((Path(folder) for folder in folders if (Path(folder) / "initdb").exists()), None)


@dataclass
class PostgresServer:
    """A running PostgreSQL cluster; `url(database)` gives a libpq URL with the password."""

    port: int
    data_dir: Path
    binaries: Path
    owner: str | None  # the OS user running it (postgres when the tests run as root), None: the current user

    def url(self, database: str = "postgres", scheme: str = "postgresql") -> str:
        return f"{scheme}://{POSTGRES_USER}:{quote(POSTGRES_PASSWORD)}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its name (random when not given)."""
        name = name or f"db_{uuid.uuid4().hex[:12]}"
        env = {**os.environ, "PGPASSWORD": POSTGRES_PASSWORD}
        subprocess.run(
            [str(self.binaries / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", POSTGRES_USER, name],
            check=True,
            capture_output=True,
            env=env,
        )
        return name

    def stop(self) -> None:
        stop = [str(self.binaries / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "immediate", "-w"]
        try:
            _as_owner(stop, self.owner)
        finally:
            # The cluster's folder goes even when pg_ctl fails (a full disk, a server already gone):
            # left behind, each is 120 MB more on a disk the next run needs.
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def _as_owner(command: list[str], owner: str | None, **kwargs) -> subprocess.CompletedProcess:
    """Run a PostgreSQL binary as `owner` (PostgreSQL refuses to run as root)."""
    full = ["runuser", "-u", owner, "--", *command] if owner else command
    return subprocess.run(full, check=True, capture_output=True, text=True, **kwargs)


def start_postgres() -> PostgresServer:
    """initdb + pg_ctl start on a free port in a new temporary directory, password authentication
    for POSTGRES_USER (a superuser). Raises ServerUnavailable saying why when it cannot."""
    binaries = postgres_binaries()
    if binaries is None:
        raise ServerUnavailable(
            "PostgreSQL binaries (pg_ctl, initdb) not found on PATH or under /usr/lib/postgresql/*/bin: "
            "install Debian's `postgresql` package (.ci/run does)"
        )
    owner = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise ServerUnavailable("running as root and there is no `postgres` user to run PostgreSQL as") from None
        owner = "postgres"
    root = Path(tempfile.mkdtemp(prefix="attn-postgres-"))
    data_dir = root / "data"
    password_file = root / "password"
    password_file.write_text(POSTGRES_PASSWORD)
    if owner:
        shutil.chown(root, owner)
        shutil.chown(password_file, owner)
    port = free_port()
    try:
        _as_owner(
            [
                str(binaries / "initdb"),
                "-D",
                str(data_dir),
                "-U",
                POSTGRES_USER,
                "--pwfile",
                str(password_file),
                "--auth",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            owner,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        # pg_ctl waits for readiness itself; its deadline (60 s by default) stretched by the load.
        wait = ["-w", "-t", str(round(stretched(60)))]
        _as_owner(
            [str(binaries / "pg_ctl"), "start", "-D", str(data_dir), "-o", options, "-l", str(root / "log"), *wait],
            owner,
        )
    except subprocess.CalledProcessError as error:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise ServerUnavailable(f"PostgreSQL did not start: {error.stderr or error.stdout}{log[-2000:]}") from error
    return PostgresServer(port=port, data_dir=data_dir, binaries=binaries, owner=owner)


S3_ACCESS_KEY = "testing-key"
S3_SECRET_KEY = "testing-secret"
S3_REGION = "us-east-1"


@dataclass
class S3Server:
    """moto's S3 on 127.0.0.1:port with fixed credentials (moto accepts any; see s3_env)."""

    port: int
    server: object

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables pointing a client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_REGION": S3_REGION,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY,
            region_name=S3_REGION,
        )

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"bucket-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def stop(self) -> None:
        self.server.stop()


def start_s3() -> S3Server:
    """moto's ThreadedMotoServer on a free port (the `moto[server]` dev extra). It accepts any
    credentials; see start_s3_process."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as error:
        raise ServerUnavailable(f"moto's server is not installed ({error}): pip install -e '.[dev]'") from error
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return S3Server(port=port, server=server)


class _MotoProcess:
    def __init__(self, process: subprocess.Popen):
        self.process = process

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_s3_process(check_credentials: bool = False) -> S3Server:
    """moto's server in its own process (no GIL shared with the caller, for benchmarks). With
    `check_credentials`, request authentication is on from the first request
    (INITIAL_NO_AUTH_ACTION_COUNT=0, a process-wide moto setting): every access key is unknown to
    it, so every request is refused as S3 refuses wrong credentials."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if check_credentials else {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool | None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return None

    try:
        wait_until_ready(
            listening, what=f"moto's server on port {port}", quiet_seconds=30, process=process, interval=0.1
        )
    except ServerUnavailable:
        process.kill()
        raise
    return S3Server(port=port, server=_MotoProcess(process))
