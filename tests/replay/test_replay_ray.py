"""`agentfsm replay --engine ray` on a real cluster of two Ray nodes started on this machine.

The nodes are started as a cluster user starts them (`ray start --head`, `ray start --address`),
one CPU each, each in its own temporary directory; the replays run as the user runs them, in a
fresh process, from the repository with relative paths, and must print what the pool prints.
"""

from __future__ import annotations

import contextlib
import json
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

import pytest

from agentfsm._cli._replay_jobs import EngineError, Job, replay_file
from agentfsm._cli.replay import main
from agentfsm._cli.replay_ray import (
    GCS_TIMEOUT,
    POLL,
    Heartbeat,
    Window,
    replay_chunk,
    shipped,
    task_failure,
)
from agentfsm._engine.policy import Policy
from tests.processes import python
from tests.replay.ray_cluster import REPO, RayCluster, _free_ports, _mine, ray_cluster

ray = pytest.importorskip("ray")

TIMEOUT = 120


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    """Two Ray nodes of one CPU each, stopped (only they) at the end of the module."""
    with ray_cluster((1, 1)) as started:
        yield started


@pytest.fixture(scope="module")
def connected(cluster: RayCluster) -> Iterator[RayCluster]:
    """This test process attached to the two-node cluster as a driver."""
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()


def _relative(corpus: Path) -> str:
    return os.path.relpath(corpus, REPO)


def _replay(
    args: list[str], env: dict[str, str], *, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`agentfsm replay ARGS` in a fresh interpreter, run from the repository."""
    env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return python("-m", "agentfsm", "replay", *args, cwd=REPO, env=env, timeout=timeout)


def _skips(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("skipped ")]


# Under pytest-xdist the tests that start a Ray of their own run in one worker, one at a time,
# beside the worker that holds the module's two-node cluster (group "ray").
@pytest.mark.xdist_group("ray-local")
class TestAttaching:
    """Where --engine ray connects, and what it says when it cannot."""

    def test_nothing_listening_is_bad_input_not_a_difference(self, corpus: Path) -> None:
        """RAY_ADDRESS naming a closed port exits 2 at once, saying how to start a cluster."""
        (port,) = _free_ports(1)
        env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_USAGE_STATS_ENABLED": "0"}
        done = _replay([str(corpus / "openhands"), "--json", "--engine", "ray"], env, timeout=60)
        assert done.returncode == 2, done.stderr
        assert f"nothing answers at 127.0.0.1:{port}" in done.stderr
        assert "ray start --head" in done.stderr
        assert "Traceback" not in done.stderr

    def test_local_starts_a_private_cluster_only_when_asked(self, tmp_path: Path) -> None:
        """--address local starts Ray for this replay alone, stopped when the replay ends."""
        for name in ("a", "b"):
            (tmp_path / f"{name}.jsonl").write_text(_CHAT, encoding="utf-8")
        root = tempfile.mkdtemp(prefix="afr-", dir="/tmp")  # Ray's socket paths must stay short
        env = {**os.environ, "RAY_TMPDIR": root, "RAY_USAGE_STATS_ENABLED": "0"}
        env["RAY_AUTH_MODE"] = "disabled"
        env.pop("RAY_ADDRESS", None)
        try:
            args = [str(tmp_path), "--json", "--engine", "ray", "--address", "local"]
            done = _replay([*args, "--workers", "2"], env)
            left = _mine(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        serial = _replay([str(tmp_path), "--json", "--engine", "serial"], env)
        assert done.returncode == 0, done.stderr
        assert "1 node(s), 2 CPU(s)" in done.stderr
        assert done.stdout == serial.stdout
        assert len(done.stdout.splitlines()) == 2
        assert left == []


class TestWorkerSide:
    """What a task does on a node."""

    def test_a_node_without_the_driver_directory_says_so(
        self, corpus: Path, tmp_path: Path
    ) -> None:
        """Relative paths fail with a message naming the missing directory; absolute ones replay."""
        absolute = str(corpus / "tau-bench" / "gpt-4o-airline.json")
        jobs = [Job(p, True, None, None, True, False) for p in ("x/run.jsonl", absolute)]
        missing = str(tmp_path / "not-here")
        relative, replayed = replay_chunk(missing, jobs)
        assert len(relative.errors) == 1
        assert f"working directory {missing} is not there" in relative.errors[0]
        assert replayed.errors == []
        assert len(replayed.lines) == 200


@pytest.mark.xdist_group("ray")  # the cluster starts once, in one worker
class TestTwoNodeCluster:
    """Replay attached to a running two-node cluster gives the pool's output byte for byte."""

    def test_ray_address_and_relative_paths_match_the_pool(
        self, cluster: RayCluster, corpus: Path
    ) -> None:
        """With RAY_ADDRESS set and a relative trace path, --json output equals the pool's."""
        trajectories = _relative(corpus)
        pool = _replay(
            [trajectories, "--json", "--engine", "process", "--workers", "2"], cluster.env
        )
        env = {**cluster.env, "RAY_ADDRESS": cluster.address}
        on_ray = _replay([trajectories, "--json", "--engine", "ray"], env)
        assert pool.returncode == 0, pool.stderr
        assert on_ray.returncode == 0, on_ray.stderr
        assert f":{cluster.port}: 2 node(s), 2 CPU(s); 2 task(s) at once" in on_ray.stderr
        assert len(pool.stdout.splitlines()) > 200
        assert on_ray.stdout == pool.stdout
        assert _skips(on_ray.stderr) == _skips(pool.stderr)

    def test_auto_and_relative_policy_files_match_the_pool(
        self, cluster: RayCluster, corpus: Path, tmp_path: Path
    ) -> None:
        """Without an address Ray's `auto` finds the cluster; relative --policy/--against work."""
        strict, loose = tmp_path / "strict.json", tmp_path / "loose.toml"
        strict.write_text(json.dumps({"max_turns": 5}), encoding="utf-8")
        loose.write_text("max_turns = 80\n", encoding="utf-8")
        args = [_relative(corpus), "--json", "--policy", _relative(strict)]
        args += ["--against", _relative(loose)]
        pool = _replay([*args, "--engine", "process", "--workers", "2"], cluster.env)
        on_ray = _replay([*args, "--engine", "ray"], cluster.env)
        assert pool.returncode == 1, pool.stderr  # the two policies differ
        assert on_ray.returncode == 1, on_ray.stderr
        assert (
            f":{cluster.port}: 2 node(s), 2 CPU(s)" in on_ray.stderr
        )  # the cluster, not a new one
        assert '"exit_reason": "max_turns"' in on_ray.stdout
        assert on_ray.stdout == pool.stdout

    def test_the_policy_travels_with_the_work(
        self, connected: RayCluster, corpus: Path, tmp_path: Path
    ) -> None:
        """Workers replay with the policy the driver read: its file may be gone by then."""
        policy = tmp_path / "policy.json"
        policy.write_text(json.dumps({"max_turns": 3}), encoding="utf-8")
        traces = sorted(str(p) for p in (corpus / "openhands").rglob("*.json"))
        jobs = [Job(path, True, str(policy), None, True, False) for path in traces]
        expected = [replay_file(job).lines for job in jobs]
        sent = shipped(jobs)
        policy.unlink()
        assert all(isinstance(job.policy, Policy) for job in sent)
        done = ray.get(ray.remote(replay_chunk).remote(os.getcwd(), sent), timeout=TIMEOUT)
        assert [outcome.errors for outcome in done] == [[] for _ in jobs]
        assert [outcome.lines for outcome in done] == expected

    def test_a_driver_already_attached_prints_what_serial_prints(
        self, connected: RayCluster, corpus: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A process already attached to Ray: `--engine ray` uses it and prints serial's lines."""
        trajectories = str(corpus / "openhands")
        assert main([trajectories, "--json", "--engine", "serial"]) == 0
        serial = capsys.readouterr().out
        assert main([trajectories, "--json", "--engine", "ray", "--workers", "2"]) == 0
        assert capsys.readouterr().out == serial
        assert ray.is_initialized()  # the replay left the host's connection open

    def test_the_window_bounds_the_work_and_keeps_the_order(self, connected: RayCluster) -> None:
        """At most `running` tasks run and `held` are out; values come back in order, both nodes."""

        def slow(index: int) -> tuple[int, str]:
            time.sleep(0.3 if index % 3 else 0.6)  # later tasks often finish first
            return index, ray.get_runtime_context().get_node_id()

        task = ray.remote(slow)
        window = Window(ray, task.remote, running=2, held=3)
        values = list(window.results(range(12)))
        assert [index for index, _ in values] == list(range(12))
        assert window.peak_busy == 2
        assert window.peak_held <= 3
        assert len({node for _, node in values}) == 2


def _running_chunks(cluster: RayCluster) -> list[int]:
    """Ids of this cluster's worker processes running a replay task (children of its raylets)."""
    ours = set(_mine(str(cluster.root)))
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command = (proc / "cmdline").read_bytes()
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if command.startswith(b"ray::replay_chunk") and parent in ours:
            found.append(int(proc.name))
    return found


def _when_a_chunk_runs(cluster: RayCluster, replay: subprocess.Popen[str]) -> int:
    """Wait until a replay task runs on the cluster; its worker's process id."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and replay.poll() is None:
        running = _running_chunks(cluster)
        if running:
            return running[0]
        time.sleep(0.05)
    raise AssertionError("no replay task ran on the cluster")


@pytest.mark.xdist_group("ray-local")
class TestEngineFailures:
    """A dying worker, node or GCS: stdout keeps only the replay's lines, the GCS loss exits 3."""

    def test_dead_workers_nodes_and_gcs(self, corpus: Path) -> None:
        """A killed worker is retried (all runs printed, Ray's notice on stderr, exit 0); a
        killed node then GCS ends with exit 3 and agentfsm's one line, not Ray's exit 1."""
        with ray_cluster((0, 1)) as cluster:  # the head has no CPU: tasks run on node 1
            env = {
                **cluster.env,
                "RAY_ADDRESS": cluster.address,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
            args = [sys.executable, "-m", "agentfsm", "replay", str(corpus), "--json"]
            args += ["--engine", "ray"]

            def start() -> subprocess.Popen[str]:
                return subprocess.Popen(
                    args,
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )

            replay = start()
            os.kill(_when_a_chunk_runs(cluster, replay), signal.SIGKILL)
            out, err = replay.communicate(timeout=TIMEOUT)
            assert replay.returncode == 0, err
            assert "A worker died or was killed" in err
            assert len(out.splitlines()) > 200
            assert all("decisions" in json.loads(line) for line in out.splitlines())

            replay = start()
            _when_a_chunk_runs(cluster, replay)
            os.killpg(cluster.nodes[1].pid, signal.SIGKILL)
            gcs = [
                p
                for p in _mine(str(cluster.root))
                if b"gcs_server" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
            for pid in gcs:
                os.kill(pid, signal.SIGKILL)
            # Ray's own driver would end the process with status 1 after 60 s; exit 3 with
            # agentfsm's line is the heartbeat's answer (TIMEOUT only bounds a hang).
            out, err = replay.communicate(timeout=TIMEOUT)
        assert replay.returncode == 3, err
        mine = [line for line in err.splitlines() if line.startswith("agentfsm replay: ")]
        assert "lost the Ray cluster: its GCS at" in mine[-1]
        assert "Traceback" not in err
        assert all("decisions" in json.loads(line) for line in out.splitlines())

    def test_a_stopped_head_is_named_as_the_lost_head(self, corpus: Path) -> None:
        """The head (the only node, running the tasks) killed with all its processes: exit 3,
        and the line names the lost cluster, never an installation problem."""
        with ray_cluster((1,)) as cluster:
            env = {**cluster.env, "RAY_ADDRESS": cluster.address}
            env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
            args = [sys.executable, "-m", "agentfsm", "replay", str(corpus), "--json"]
            replay = subprocess.Popen(
                [*args, "--engine", "ray"],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            _when_a_chunk_runs(cluster, replay)
            # The head machine gone: every process of the cluster (GCS, raylet, workers).
            os.killpg(cluster.nodes[0].pid, signal.SIGKILL)
            for pid in _mine(str(cluster.root)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            out, err = replay.communicate(timeout=TIMEOUT)
        assert replay.returncode == 3, err
        mine = [line for line in err.splitlines() if line.startswith("agentfsm replay: ")]
        assert "lost the Ray cluster" in mine[-1], mine
        assert "installed on every node" not in err
        assert "Traceback" not in err
        assert all("decisions" in json.loads(line) for line in out.splitlines())


@contextlib.contextmanager
def _listening() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections (a head that answers): its address."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


def _closed() -> str:
    """An address where nothing listens (a stopped head): connections are refused at once."""
    (port,) = _free_ports(1)
    return f"127.0.0.1:{port}"


class FakeClock:
    """The time a Heartbeat counts with, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestTaskFailures:
    """What the replay says when a task fails, on Ray's own exception types (no cluster)."""

    def _code_failure(self) -> BaseException:
        cause = ModuleNotFoundError("No module named 'agentfsm'")
        trace = (
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'agentfsm'"
        )
        failure: BaseException = ray.exceptions.RayTaskError(
            "replay_chunk", trace, cause
        ).as_instanceof_cause()
        return failure

    def test_a_stopped_head_is_named_not_an_installation_problem(self) -> None:
        """Whatever Ray raised, a head that refuses connections is the lost head."""
        head = Heartbeat(_closed())
        for raised in (
            ray.exceptions.LocalRayletDiedError(),
            ray.exceptions.WorkerCrashedError(),
            ray.exceptions.RaySystemError("System error: GCS is unreachable"),
            self._code_failure(),
        ):
            said = str(task_failure(ray, raised, head))
            assert f"lost the Ray cluster's head: its GCS at {head.address} does not answer" in (
                said
            ), said
            assert "installed on every node" not in said
            assert "ray start --head" in said

    def test_a_node_lost_under_a_task_while_the_head_answers(self) -> None:
        """The head answers: a lost raylet, worker or node is named as such."""
        with _listening() as address:
            head = Heartbeat(address)
            for raised in (
                ray.exceptions.LocalRayletDiedError(),
                ray.exceptions.WorkerCrashedError(),
                ray.exceptions.NodeDiedError("node 1 died"),
            ):
                said = str(task_failure(ray, raised, head))
                assert "was lost with its node or worker" in said, said
                assert type(raised).__name__ in said
                assert "installed on every node" not in said

    def test_the_tasks_own_code_failing_asks_about_the_installation(self) -> None:
        """A task that raised (an import error on a node) keeps the installation question."""
        with _listening() as address:
            said = str(task_failure(ray, self._code_failure(), Heartbeat(address)))
        assert "No module named 'agentfsm'" in said
        assert "is the same agentfsm installed on every node?" in said


class TestHeartbeat:
    """The GCS watch, on real sockets, counting with a clock the test moves."""

    def test_a_silent_gcs_stops_the_replay_after_the_timeout_not_before(self) -> None:
        clock = FakeClock()
        heartbeat = Heartbeat(_closed(), clock=clock)
        heartbeat.check()  # first silence: noted, not yet fatal
        clock.now += POLL / 2
        heartbeat.check()  # within POLL: not even looked at
        clock.now += GCS_TIMEOUT - POLL
        heartbeat.check()
        clock.now += POLL
        with pytest.raises(EngineError, match=f"has not answered for {GCS_TIMEOUT:g} s"):
            heartbeat.check()

    def test_an_answer_resets_the_silence(self) -> None:
        clock = FakeClock()
        with _listening() as address:
            heartbeat = Heartbeat(address, clock=clock)
            heartbeat.silent_since = clock.now - 10 * GCS_TIMEOUT
            heartbeat.check()
            assert heartbeat.silent_since is None
            clock.now += 10 * GCS_TIMEOUT
            heartbeat.check()
            assert heartbeat.silent_since is None


_CHAT = "".join(
    json.dumps(message) + "\n"
    for message in [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "done"},
    ]
)
