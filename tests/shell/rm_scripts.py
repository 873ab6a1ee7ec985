"""What the shell tests share: a deny rule on `rm -rf`, a policy's verdict, bash's own runs,
and the tests every table of scripts that run `rm -rf /` gets."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

import agentfsm as af

DENY = "deny bash(command~rm -rf *)"

_UNIT, _RECORD = "\x1f", "\x1e"
_STAND_IN = """#!/bin/sh
# Logs its name and arguments in one write, then does nothing.
record={name}
for arg in "$@"; do record="$record$(printf '\\037')$arg"; done
printf '%s\\036' "$record" >> {log}
"""


def verdict(rules: Sequence[Any], command: object, **policy: Any) -> str:
    """The permission a policy with these rules (and other fields) gives `bash(command)`."""
    call = af.ToolCall(id="c1", name="bash", arguments={"command": command})
    return af.Policy(permission_rules=list(rules), **policy).permission_for(call)


def rm_runs(command: str, scratch: Path) -> list[list[str]]:
    """The arguments of each `rm` that bash runs for `command` (a tracer stands in for rm)."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    log = scratch / "rm.log"
    tracer = bin_dir / "rm"
    tracer.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    tracer.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(scratch)}
    subprocess.run(
        # `wait`: a coprocess's rm may not have run yet when the script's last command ends.
        ["bash", "-c", command + "\nwait"],
        cwd=scratch,
        env=env,
        capture_output=True,
        timeout=10,
        check=False,
    )
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


class ScriptsRunningRm:
    """A table of scripts that each run `rm -rf /` in bash: a deny rule denies each, an
    allow-list of every other command in them does not allow it, and real bash does run it.

    A test class takes these tests by subclassing and setting `scripts` and `allow`.
    """

    scripts: ClassVar[Sequence[str]]
    """The table: scripts bash runs `rm -rf /` for."""
    allow: ClassVar[Sequence[str]]
    """Allow rules covering every command of the table except `rm`."""
    alone: ClassVar[Sequence[str] | None] = None
    """The scripts bash runs `rm -rf /` for with nothing set before them (all when None);
    the others need a variable from outside, and their class tests them with it."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # The tables are each subclass's own, so the cases are known only per class.
        if "script" in metafunc.fixturenames:
            metafunc.parametrize("script", self.scripts)
        if "script_alone" in metafunc.fixturenames:
            metafunc.parametrize("script_alone", self.scripts if self.alone is None else self.alone)

    def test_a_deny_rule_denies_it(self, script: str) -> None:
        """A deny shell rule denies it: the command is seen, or the script is unsure."""
        assert verdict([DENY], script) == "deny"

    def test_an_allow_list_does_not_allow_it(self, script: str) -> None:
        """Allow rules that cover every other command in it, under a deny default, do not
        allow it: `rm` would run unseen."""
        assert verdict(self.allow, script, permissions={"*": "deny"}) == "deny"

    def test_bash_runs_rm_rf(self, script_alone: str, tmp_path: Path) -> None:
        """Real bash runs `rm -rf /` for it (a traced `rm` stands in)."""
        assert ["-rf", "/"] in rm_runs(script_alone, tmp_path)


class Tracer:
    """Runs scripts with real bash and reports the traced commands they ran: a stand-in for
    each of `names`, first on PATH, logs its name and arguments and does nothing else."""

    def __init__(self, root: Path, names: Sequence[str], prefix: Sequence[str] = ()) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.log = root / "trace.log"
        for name in names:
            path = self.bin / name
            path.write_text(_STAND_IN.format(name=name, log=shlex.quote(str(self.log))))
            path.chmod(0o755)
        self.prefix = list(prefix)
        """Words run before `bash` (`unshare -rn`)."""

    @property
    def path(self) -> str:
        return f"{self.bin}:/usr/bin:/bin"

    def run(
        self, script: str, timeout: float = 10.0, *, folders: Sequence[str] = ()
    ) -> list[list[str]]:
        """Run `script` with bash in a fresh scratch directory holding `folders`; each traced
        command it ran, as its name and arguments."""
        self.log.write_text("")
        with tempfile.TemporaryDirectory() as scratch:
            for folder in folders:
                (Path(scratch) / folder).mkdir()
            env = {"PATH": self.path, "HOME": scratch, "LC_ALL": "C"}
            process = subprocess.Popen(
                [*self.prefix, "bash", "--norc", "--noprofile", "-c", script],
                cwd=scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pytest.fail(f"bash did not end in {timeout} s: {script!r}")
            finally:
                # Stop what the script left running (a background job, a wrapper's child).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        records = self.log.read_text().split(_RECORD)
        return [r.split(_UNIT) for r in records if r]
