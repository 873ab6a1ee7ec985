"""Wrapper options read as the programs read them (issue 30, items 8 and 9's `time -o`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.shell.rm_scripts import DENY, Tracer, verdict
from tests.shell.test_shell_differential import traced, tracer, unseen

__all__ = ["tracer"]  # the fixture, shared with the differential test

REAL = [
    "env 'a b=1' rm -rf DIR",
    "env 1=1 rm -rf DIR",
    "env =1 rm -rf DIR",
    "env -- a=1 rm -rf DIR",
    "printf 'DIR\\n' | xargs -l rm -rf",
    "printf 'DIR\\n' | xargs -l1 rm -rf",
    "printf 'DIR\\n' | xargs -e rm -rf",
    "printf 'DIR\\n' | xargs -eEND rm -rf",
    "printf 'DIR\\n' | xargs -i rm -rf {} DIR",
    "printf 'DIR\\n' | xargs -I X rm -rf X",
    "printf 'DIR\\n' | xargs --replace rm -rf {}",
    "printf 'DIR\\n' | xargs --max-lines rm -rf",
    "printf 'DIR\\n' | xargs --eof rm -rf",
    "printf 'DIR\\n' | xargs --no-run-if-empty rm -rf",
    "flock lk -c 'rm -rf DIR'",
    "flock -n lk --command 'rm -rf DIR'",
    "flock --verbose lk rm -rf DIR",
    "eval -- rm -rf DIR",
    "trap -- 'rm -rf DIR' EXIT",
]
"""Spellings that run `rm -rf` through a wrapper's options, checked with the real programs."""

DOCUMENTED = [
    "sudo A=1 -u root rm -rf /",
    "sudo 'a b=1' rm -rf /",
    "sudo -s rm -rf /",
    "sudo -i 'rm -rf /'",
    "sudo -s <<'EOF'\nrm -rf /\nEOF",
    "sudo -B rm -rf /",
    "su -w -c -c 'rm -rf /'",
    "su root -- -c 'rm -rf /'",
    "runuser -l root -c 'rm -rf /'",
    "chroot /srv <<'EOF'\nrm -rf /\nEOF",
    "doas -s <<< 'rm -rf /'",
]
"""Spellings checked against the programs' sources (sudo's parse_args.c, util-linux su)."""

PRECISE = [
    "trap -p 'rm -rf DIR' EXIT",
    "eval -x rm -rf DIR",
    "flock lk -- rm -rf DIR",
    "printf 'a\\n' | xargs -I X echo rm -rf X",
    "command time -o notes ls",  # read (a write, as `ls > notes`), not unsure
]
"""Spellings that name rm -rf without running it."""


@pytest.mark.parametrize("command", REAL + DOCUMENTED)
def test_a_wrapped_rm_rf_is_denied(command: str) -> None:
    """One deny shell rule denies `rm -rf` however the wrapper's options are spelled."""
    assert verdict([DENY], command) == "deny"


@pytest.mark.parametrize("command", REAL)
def test_the_real_programs_run_rm_rf(tracer: Tracer, command: str) -> None:
    """Each spelling really runs `rm -rf` (so the case is real), and the reader saw it."""
    runs = traced(tracer, command)
    assert any(r.name == "rm" and "-rf" in r.args for r in runs), runs
    assert not unseen(tracer, command)


@pytest.mark.parametrize("command", PRECISE)
def test_what_does_not_run_rm_is_not_denied(tracer: Tracer, command: str) -> None:
    """Options that print, fail or run another program are read so: nothing denied."""
    assert not [r for r in traced(tracer, command) if r.name == "rm"]
    assert verdict([DENY], command) == "allow"


ALLOW = ["allow bash(command~ls *)"]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("command time -f T -o .git/config ls", "deny"),
        ("/usr/bin/time --output=notes ls", "deny"),
        ("time -ao notes ls", "deny"),
        ("time -o /dev/null ls", "allow"),
        ("time -p ls", "allow"),
        ("ls > notes", "deny"),
    ],
)
def test_time_output_is_a_write(command: str, expected: str) -> None:
    """Under an allow-list with a deny default, `time -o FILE` is not covered by `allow ls`."""
    assert verdict(ALLOW, command, permissions={"*": "deny"}) == expected


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="needs GNU time")
def test_gnu_time_writes_its_output_file() -> None:
    """The case is real: GNU time with `-o` writes the file it names."""
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, ".git").mkdir()
        bash = shutil.which("bash") or "bash"
        subprocess.run(
            [bash, "-c", "command time -f T -o .git/config ls"],
            cwd=scratch,
            capture_output=True,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert Path(scratch, ".git", "config").read_text().strip() == "T"
    assert verdict([DENY], "time -o x rm -rf /") == "deny"
