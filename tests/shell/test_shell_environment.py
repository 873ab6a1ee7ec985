"""The shell reader against real bash on the environment: an allow rule never covers a script
after which a command it runs sees an environment other than the one the script was given.

A program reads its environment (`PATH` finds it, `GIT_SSH_COMMAND` makes `git fetch` run a
command, `LD_PRELOAD` loads a library), and which variables the shell that runs the script
exports is not known when the call is judged: `PATH=/tmp/x; git fetch` runs `/tmp/x/git`,
and an already exported `GIT_SSH_COMMAND` that the script assigns reaches git. So a script
that may set a variable is never covered by allow patterns (`Script.sets`).

The check: real `bash --norc --noprofile` runs each script with `AF_PROBE` exported, a
stand-in `probe` first on PATH logs the environment it was started with, and the policy
`allow bash(command~*:*)` (every command, so only the reader's doubt can keep the allow
away) is asked about the same text. Whenever a `probe` saw an environment other than the
one a bare `probe` sees, the verdict must not be allow. Setters (every way bash can set,
change or unset a variable, or change the directory) are placed in the grammar's forms
(`test_shell_grammar.FORMS`), once each in a sweep and nested at random in a property.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from agentfsm._shell.closed import BASH_BUILTINS
from agentfsm._shell.reader import _INERT_BUILTINS
from tests.shell.rm_scripts import verdict
from tests.shell.test_shell_grammar import FORMS, NESTING, Form

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

ALLOW_ALL = ["allow bash(command~*:*)"]

SETTERS = {
    "assignment": "AF_PROBE=x",
    "export": "export AF_PROBE=x",
    "declare -x": "declare -x AF_PROBE=x",
    "declare": "declare AF_PROBE=x",
    "typeset": "typeset AF_PROBE=x",
    "append": "AF_PROBE+=x",
    "element": "AF_PROBE[0]=x",
    "array": "AF_PROBE=(x y)",
    "arithmetic": "(( AF_PROBE = 3 ))",
    "increment": "(( AF_PROBE++ ))",
    "shift-assign": "(( AF_PROBE <<= 2 ))",
    "$(( += ))": ": $(( AF_PROBE += 1 ))",
    "let": "let AF_PROBE=2",
    "read": "read -r AF_PROBE <<< x",
    "printf -v": "printf -v AF_PROBE x",
    "mapfile": "mapfile AF_PROBE <<< x",
    "readarray": "readarray -t AF_PROBE <<< x",
    "getopts": "getopts a AF_PROBE -a",
    "unset": "unset AF_PROBE",
    "unset -v": "unset -v AF_PROBE",
    "export -n": "export -n AF_PROBE",
    "eval": "eval AF_PROBE=x",
    "${:=}": "unset AF_PROBE; : ${AF_PROBE:=x}",
    "PATH": "PATH=$PATH:/nowhere",
    "cd": "cd /",
    "set -a": "set -a; AF_OTHER=1",
    "nameref": "declare -n ref=AF_PROBE; ref=x",
    "for": "for AF_PROBE in x; do :; done",
    "select": "select AF_PROBE in x; do break; done <<< 1",
    "coproc": "coproc AF_PROBE { :; }",
    "source": "echo AF_PROBE=x > set.sh; . ./set.sh",
    "trap": "trap 'AF_PROBE=x' DEBUG",
    "env": "env AF_PROBE=x probe",
    "prefix": "AF_PROBE=x probe",
    "bash -c": "bash -c 'AF_PROBE=x probe'",
}
"""Ways bash sets, changes or unsets a variable (or changes the directory), each in the
script before `probe` runs."""


class Probe:
    """Runs scripts in real bash with `AF_PROBE` exported; the environments `probe` saw."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.log = root / "env.log"
        self.cwd = root / "cwd"
        self.cwd.mkdir()
        stand_in = self.bin / "probe"
        stand_in.write_text(
            f"#!/bin/sh\n# Logs the environment it was started with, then nothing.\n"
            f"{{ env; pwd; printf '\\036'; }} >> {shlex.quote(str(self.log))}\n"
        )
        stand_in.chmod(0o755)

    def environments(self, script: str, timeout: float = 10.0) -> list[frozenset[str]]:
        self.log.write_text("")
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.cwd), "LC_ALL": "C"}
        env["AF_PROBE"] = "1"
        try:
            subprocess.run(
                ["bash", "--norc", "--noprofile", "-c", script],
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"bash did not end in {timeout} s: {script!r}")
        records = self.log.read_text().split("\x1e")
        # `_` is the path bash started the command by; SHLVL grows under `bash -c`.
        return [
            frozenset(v for v in r.split("\n") if v and not v.startswith(("_=", "SHLVL=")))
            for r in records
            if r.strip()
        ]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    return Probe(tmp_path_factory.mktemp("environment"))


@pytest.fixture(scope="module")
def given_env(probe: Probe) -> frozenset[str]:
    seen = probe.environments("probe")
    assert len(seen) == 1
    return seen[0]


def _check(probe: Probe, baseline: frozenset[str], script: str) -> str | None:
    """Why `script` shows the reader wrong, or None."""
    changed = [env for env in probe.environments(script) if env != baseline]
    if changed and verdict(ALLOW_ALL, script) == "allow":
        differs = sorted(changed[0] ^ baseline)[:4]
        return f"a command of {script!r} ran with {differs}, and an allow rule covered it"
    return None


def _placed(setter: str, form: Form) -> str:
    return form.fill(f"{setter}\nprobe")


def _sweep() -> Iterator[tuple[str, str]]:
    for name, setter in SETTERS.items():
        yield name, f"{setter}\nprobe"
    for form in NESTING:
        yield form.name, _placed(SETTERS["assignment"], form)


class TestSweep:
    def test_no_setter_in_any_form_is_allowed_when_it_changed_the_environment(
        self, probe: Probe, given_env: frozenset[str]
    ) -> None:
        """Every setter once, and the plain assignment in every form that nests: a script
        after which `probe` saw another environment is never allowed. Each setter must
        change what `probe` sees (or the test would prove nothing about it)."""
        problems, unchanged = [], []
        for name, script in _sweep():
            if name in SETTERS and all(env == given_env for env in probe.environments(script)):
                unchanged.append(name)
            problem = _check(probe, given_env, script)
            if problem is not None:
                problems.append(f"{name}: {problem}")
        assert not problems, "\n".join(problems)
        # Some setters change nothing a child sees: `declare`, `typeset`, `AF_PROBE[0]=`
        # and `(( ))` keep the variable exported with a new value, so they do; `trap` and
        # `set -a` are here for the reader's sake (a DEBUG trap runs before `probe`).
        assert len(unchanged) <= 4, f"setters that changed nothing: {unchanged}"

    def test_the_check_can_fail(self, probe: Probe, given_env: frozenset[str]) -> None:
        """A script that changes the environment is caught when a reader allows it; one that
        does not change it never is."""
        assert any(env != given_env for env in probe.environments("PATH=$PATH:/x\nprobe"))
        assert verdict(["allow bash(command~probe)"], "probe") == "allow"
        assert _check(probe, given_env, "probe") is None

    def test_a_plain_script_is_still_allowed(self) -> None:
        """Reading the environment, not setting it, keeps the allow: `echo $HOME`, a pipe."""
        assert verdict(ALLOW_ALL, 'echo "$HOME" | wc -c && ls -la') == "allow"


@st.composite
def scripts(draw: st.DrawFn) -> str:
    """One or two setters before `probe`, in up to three nested random forms."""
    chosen = draw(st.lists(st.sampled_from(sorted(SETTERS)), min_size=1, max_size=2))
    for name in chosen:
        event(f"setter {name}")
    text = "\n".join(SETTERS[n] for n in chosen) + "\nprobe"
    for _ in range(draw(st.integers(0, 3))):
        form = draw(st.sampled_from(NESTING))
        event(f"form {form.name}")
        text = form.fill(text)
    return text


class TestProperty:
    @given(data=st.data())
    def test_a_script_that_changes_the_environment_is_never_allowed(
        self, probe: Probe, given_env: frozenset[str], data: st.DataObject
    ) -> None:
        script = data.draw(scripts(), label="script")
        problem = _check(probe, given_env, script)
        assert problem is None, problem


def test_every_form_name_is_known() -> None:
    """The forms come from the grammar test: a rename there must not empty this sweep."""
    assert len(NESTING) > 30
    assert {f.name for f in FORMS} >= {"for", "function", "$( )", "bash -c", "subshell"}


@pytest.mark.parametrize("builtin", sorted(BASH_BUILTINS - _INERT_BUILTINS - {"set"}))
def test_a_builtin_not_known_to_be_inert_is_never_covered(builtin: str) -> None:
    """The builtins are a closed list the other way round: only those known to leave later
    commands as they were are inert; every other one (`hash -p`, `umask`, `shopt`, `alias`,
    `ulimit`, `cd`, ...) keeps allow rules from covering the script."""
    assert verdict(ALLOW_ALL, f"{builtin} x\nls") != "allow"


@pytest.mark.parametrize(
    ("script", "allowed"),
    [
        ("set -e; ls", True),
        ("set -euo pipefail; ls", True),
        ("set +o nounset -x; ls", True),
        ("set -k; ls X=1", False),  # an assignment among a command's words goes to its env
        ("set -a; ls", False),
        ("set -o posix; ls", False),
        ("set -o; ls", False),
        ("hash -p /tmp/x git; git fetch", False),
    ],
)
def test_set_is_inert_only_with_options_that_change_the_script_alone(
    script: str, allowed: bool
) -> None:
    assert (verdict(ALLOW_ALL, script) == "allow") is allowed
