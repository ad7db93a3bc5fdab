"""A Chroma server and a PostgreSQL cluster on 127.0.0.1 for the server-mode benchmarks
(``scale.py``, ``concurrency.py``): the same commands the tests start (``tests/conftest.py``'s
``chroma run``, ``tests/integration/test_postgres.py``'s throwaway cluster), without pytest.

    with ChromaServer(folder) as chroma, PostgresCluster(folder) as pg:
        engine = MemoryEngine.open(chroma_url=chroma.url, sql_url=pg.new_database())
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["ChromaServer", "PostgresCluster", "disk_mb", "loadavg", "process_rss_mb"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def disk_mb(path: Path) -> float:
    """Disk blocks used under ``path``, in MB."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, f)).st_blocks * 512
    return total / 2**20


def loadavg() -> str:
    """The machine's 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def process_rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes (VmRSS, summed), in MB."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _children(pid: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return []
    kids = [int(x) for x in out.split()]
    return kids + [g for k in kids for g in _children(k)]


class ChromaServer:
    """``chroma run --path <folder>/chroma`` on a free port (started by :meth:`start`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.data = self.folder / "chroma"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ChromaServer:
        import httpx

        cli = Path(sys.executable).parent / "chroma"
        exe = str(cli) if cli.exists() else shutil.which("chroma") or "chroma"
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / "chroma.log", "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.data), "--host", "127.0.0.1", "--port",
             str(self.port)], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        log.close()
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.folder / "chroma.log").read_text()[-2000:]
                raise RuntimeError(f"chroma server did not start: {tail}")
            time.sleep(0.1)

    @property
    def pids(self) -> list[int]:
        return [] if self.proc is None else [self.proc.pid, *_children(self.proc.pid)]

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian: postgresql)")


class PostgresCluster:
    """A new PostgreSQL cluster in ``<folder>/pg`` on a free 127.0.0.1 port (as the
    ``postgres`` system user when run as root: PostgreSQL refuses root)."""

    def __init__(self, folder: Path) -> None:
        self.base = Path(folder) / "pg"
        self.data = self.base / "data"
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"
        self.prefix: list[str] = []
        self.running = False

    def start(self) -> PostgresCluster:
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            os.chmod(self.base, 0o777)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        if not self.data.exists():
            subprocess.run([*self.prefix, _pg_bin("initdb"), "-D", str(self.data), "-A", "trust",
                            "-U", "postgres"], check=True, capture_output=True)
        subprocess.run([*self.prefix, _pg_bin("pg_ctl"), "-D", str(self.data), "-l",
                        str(self.base / "log"), "-w", "-o",
                        f"-p {self.port} -k {self.base} -h 127.0.0.1", "start"], check=True,
                       capture_output=True)
        self.running = True
        import psycopg

        for _ in range(200):
            try:
                with psycopg.connect(self._plain("postgres"), autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return self
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not answer")

    def _plain(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def new_database(self, name: str | None = None) -> str:
        """A new empty database; its SQLAlchemy URL."""
        import psycopg

        name = name or f"m{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self._plain("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"{self.url}/{name}"

    @property
    def pids(self) -> list[int]:
        pidfile = self.data / "postmaster.pid"
        try:
            main = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [main, *_children(main)]

    def stop(self) -> None:
        if self.running:
            subprocess.run([*self.prefix, _pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast",
                            "-w", "stop"], capture_output=True)
            self.running = False

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
