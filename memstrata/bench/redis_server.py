"""Private ``redis-server`` processes without persistence, killed and restarted on purpose.

The durability tests (tests/test_session_durability.py) and ``memstrata bench chaos``
start one (or a 3-node Redis Cluster) on free ports: a restart comes back empty, as a
Redis without append-only persistence does.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from ..errors import ConfigError

__all__ = ["RedisServer", "free_port"]


def free_port() -> int:
    """A TCP port nobody listens on now, and port + 10000 neither: a cluster node listens
    there too (a full-suite run once lost a node to a bus port already taken)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55000 and _bindable(port + 10000):
            return port


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _up(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class RedisServer:
    """redis-server processes (one, or three as a cluster) without persistence in ``tmp``."""

    def __init__(self, tmp: Path, cluster: bool = False) -> None:
        if not shutil.which("redis-server"):
            raise ConfigError("redis-server is not installed (apt-get install redis-server)")
        self.tmp, self.cluster = Path(tmp), cluster
        self.ports = [free_port() for _ in range(3 if cluster else 1)]

    def start(self) -> None:
        """Start every node and wait until it answers (a cluster: until its state is ok)."""
        for p in self.ports:
            extra = (["--cluster-enabled", "yes", "--cluster-config-file", str(self.tmp / f"n{p}.conf")]
                     if self.cluster else [])
            subprocess.run(["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--daemonize", "yes", "--dir", str(self.tmp),
                            "--logfile", str(self.tmp / f"n{p}.log"), *extra], check=True)
        for p in self.ports:
            for _ in range(200):
                if _up(p):
                    break
                time.sleep(0.05)
        if self.cluster:
            if not (self.tmp / "created").exists():
                subprocess.run(["redis-cli", "--cluster", "create",
                                *[f"127.0.0.1:{p}" for p in self.ports], "--cluster-replicas", "0",
                                "--cluster-yes"], check=True, capture_output=True, timeout=60)
                (self.tmp / "created").touch()
            for _ in range(300):  # a restarted node rejoins from its nodes.conf, empty
                info = subprocess.run(["redis-cli", "-p", str(self.ports[0]), "cluster", "info"],
                                      capture_output=True, text=True).stdout
                if "cluster_state:ok" in info:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    def kill(self) -> None:
        """Stop every node without saving, and wait until none answers."""
        for p in self.ports:
            subprocess.run(["redis-cli", "-p", str(p), "shutdown", "nosave"], capture_output=True)
        for p in self.ports:
            for _ in range(200):
                if not _up(p):
                    break
                time.sleep(0.05)

    def keys(self) -> int:
        """How many keys the nodes hold."""
        return sum(int(subprocess.run(["redis-cli", "-p", str(p), "dbsize"], capture_output=True,
                                      text=True).stdout.strip() or 0) for p in self.ports)

    def url_with(self, prefix: str) -> str:
        """The session-store URL with a key prefix."""
        if self.cluster:
            return f"redis+cluster://127.0.0.1:{self.ports[0]}/?prefix={prefix}"
        return f"redis://127.0.0.1:{self.ports[0]}/0?prefix={prefix}"

    @property
    def url(self) -> str:
        return self.url_with("dur")
