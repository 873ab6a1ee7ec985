"""A Ray cluster of several nodes on this machine, started with `ray start` and stopped by its own.

Each node is a `ray start --block` process in a session of its own, with its own CPUs, ports and
temporary directory (under one root made for this cluster), so stopping it signals only its own
processes: `ray stop` would stop every Ray process of the machine, other people's included.
Used by the two-node replay test and by `bench/bench_replay_ray.py`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
_PORTS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-grpc-port",
    "--dashboard-agent-listen-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)
"""Ports every node opens; left to Ray, two clusters on one machine can pick the same."""
_HEAD_PORTS = ("--dashboard-port",)


class RayCluster:
    """Nodes of one Ray cluster on 127.0.0.1; `address` is the head's `host:port`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.address = ""
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "RAY_TMPDIR": str(root),  # where `auto` finds this cluster's address
            "RAY_USAGE_STATS_ENABLED": "0",
            # Token authentication turns itself on when ~/.ray holds a token, and a node
            # joining without it is refused: a test cluster on 127.0.0.1 does without.
            "RAY_AUTH_MODE": "disabled",
        }
        self.env.pop("RAY_ADDRESS", None)

    def add_node(self, cpus: int) -> None:
        """Start a node with `cpus` CPUs: the head first, then nodes that join it."""
        index = len(self.nodes)
        # The head's directory is `$RAY_TMPDIR/ray`, where Ray's `auto` looks for its address.
        temp = self.root / ("ray" if index == 0 else f"n{index}")
        temp.mkdir()
        ports = _free_ports(len(_PORTS) + len(_HEAD_PORTS) + 1)
        args = [RAY, "start", "--block", "--num-cpus", str(cpus), "--node-ip-address", "127.0.0.1"]
        args += ["--temp-dir", str(temp), "--disable-usage-stats"]
        args += [f"{name}={port}" for name, port in zip(_PORTS, ports, strict=False)]
        if index == 0:
            self.address = f"127.0.0.1:{ports[-1]}"
            args += ["--head", f"--port={ports[-1]}", "--include-dashboard=false"]
            args += [f"{n}={p}" for n, p in zip(_HEAD_PORTS, ports[len(_PORTS) :], strict=False)]
        else:
            args += [f"--address={self.address}"]
        with (self.root / f"n{index}.log").open("wb") as log:
            self.nodes.append(
                subprocess.Popen(
                    args,
                    cwd=temp,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    @property
    def port(self) -> str:
        """The head's port."""
        return self.address.rpartition(":")[2]

    def wait_listening(self, timeout: float = 60.0) -> None:
        """Wait until the head's port accepts connections (nodes can join from then on)."""
        host, _, port = self.address.rpartition(":")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.nodes[0].poll() is None:
            with contextlib.suppress(OSError), socket.create_connection((host, int(port)), 1):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Ray head did not start:\n{self.logs()}")

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until every node's `ray start` says it runs, or raise with the nodes' logs."""
        deadline = time.monotonic() + timeout
        logs = [self.root / f"n{index}.log" for index in range(len(self.nodes))]
        while not all(b"Ray runtime started." in log.read_bytes() for log in logs):
            dead = any(node.poll() is not None for node in self.nodes)
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray cluster did not come up:\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        """The tail of every node's `ray start` output."""
        return "\n".join(
            p.read_text(errors="replace")[-2000:] for p in sorted(self.root.glob("n*.log"))
        )

    def stop(self) -> None:
        """Stop this cluster's processes, and only them: each node's session, then stragglers."""
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + 2
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait()
        for pid in _mine(str(self.root)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _mine(root: str) -> list[int]:
    """Ids of this user's processes whose command line names `root` (a directory only we made)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if (
                proc.stat().st_uid == os.getuid()
                and root.encode() in (proc / "cmdline").read_bytes()
            ):
                found.append(int(proc.name))
    return found


def _free_ports(count: int) -> list[int]:
    """`count` different ports free on 127.0.0.1 now."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in ports:
            ports.append(port)
    return ports


@contextlib.contextmanager
def ray_cluster(cpus: tuple[int, ...] = (1, 1)) -> Iterator[RayCluster]:
    """A running cluster with one node per entry of `cpus`; stopped and removed afterwards."""
    # A short root: Ray's socket paths under it must stay within the 107 bytes a socket allows.
    root = Path(tempfile.mkdtemp(prefix="afr-", dir="/tmp"))
    cluster = RayCluster(root)
    try:
        for count in cpus:
            cluster.add_node(count)
            if len(cluster.nodes) == 1:
                cluster.wait_listening()
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
