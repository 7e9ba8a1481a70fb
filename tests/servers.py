"""Real servers for tests, started by the tests: PostgreSQL from the machine's binaries (Debian's
`postgresql` package) in a temporary directory, and an S3 endpoint from moto's threaded server.
Both listen on a free port of 127.0.0.1 and are stopped by the caller (the fixtures in
tests/conftest.py). No mocks: DuckLake and the Dagster instance talk to them over the network."""

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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

POSTGRES_USER = "attn"
POSTGRES_PASSWORD = "attn-test-pw"
# Debian's postgresql package keeps pg_ctl and initdb off PATH, under /usr/lib/postgresql/<major>/bin.
_DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"


class ServerUnavailable(RuntimeError):
    """A server could not be started here; the message says why (tests skip with it)."""


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
        _as_owner(stop, self.owner)
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
        _as_owner(
            [str(binaries / "pg_ctl"), "start", "-D", str(data_dir), "-o", options, "-l", str(root / "log"), "-w"],
            owner,
        )
    except subprocess.CalledProcessError as error:
        log = (root / "log").read_text() if (root / "log").exists() else ""
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
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return S3Server(port=port, server=_MotoProcess(process))
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise ServerUnavailable(f"moto's server did not start on port {port}") from None
            time.sleep(0.1)
