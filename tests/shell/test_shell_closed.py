"""The shell reader's closed world: what it does not model is unsure, and its lists are whole.

The tables in `agentfsm._shell.closed` (and the builtin handlers in the reader) are checked
against the grammar's own node kinds and against `bash -c 'compgen -b'`, so a kind or a
builtin no list names fails here rather than being read as harmless.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tree_sitter
import tree_sitter_bash

from agentfsm import _shell as shell
from agentfsm._shell.closed import (
    BASH_BUILTINS,
    BASH_VARIABLES,
    DATA_BUILTINS,
    MODELLED_NODES,
    MODELLED_TOKENS,
    MODELLED_VARIABLES,
    REDIRECTIONS,
    SET_FLAGS,
    SET_OPTIONS,
    SHOPT_OPTIONS,
    UNMODELLED_BUILTINS,
    UNMODELLED_NODES,
    UNMODELLED_TOKENS,
)
from agentfsm._shell.reader import BUILTINS
from tests.docs.scripts import DOCS
from tests.shell.rm_scripts import DENY, ScriptsRunningRm, verdict

REDIRECTED = [
    "rm >/dev/null -rf /",
    "rm 2>/dev/null -rf 2>/dev/null /",
    "rm 2>&1 -rf /",
    "rm &>/dev/null -rf /",
    "rm >>/dev/null -rf /",
    "rm >|/dev/null -rf /",
    "rm 3>/dev/null -rf /",
    "rm </dev/null -rf /",
    "rm <&0 -rf /",
    "rm >&2 -rf /",
    "rm </dev/null -rf <&0 /",
    "env >/dev/null rm -rf /",
    "env 2>&1 rm -rf /",
    "echo | rm 2>/dev/null -rf /",
    "! rm >/dev/null -rf /",
    "true && rm >/dev/null -rf /",
    "rm <<E -rf /\nx\nE",
    "rm <<-E -rf /\n\tx\n\tE",
    "true && rm <<E -rf /\nx\nE",
    "rm <<E >/dev/null -rf /\nx\nE",
    "rm 3>&- -rf </dev/null /",  # `>&-` takes no target: `-rf` is rm's
    "true &&\nrm 4<&- -rf </dev/null /",
    "rm 3>&- -rf <<-E /\n\tx\n\tE",
    # the grammar reads the last two lines as one command `set -e rm -rf /` (found by the
    # generated test): a newline between a command's parts is unsure
    "echo a |&\necho a |&\nset -e\n'rm' -rf / <&0 >&2",
]
"""A redirection between a command's words: bash gives the words after its target to the
command (the grammar hangs them on the redirection)."""

EVALUATING_BUILTINS = [
    "shopt -s expand_aliases\nalias r=rm\nr -rf /",
    "shopt -s expand_aliases\nalias r='rm -rf'\nr /",
    "shopt -s expand_aliases\nBASH_ALIASES[r]=rm\nr -rf /",
    'declare -a "a[\\$(rm -rf /)]=1"',
    "declare 'a[$(rm -rf /)]=1'",
    "typeset 'a[$(rm -rf /)]=1'",
    "f() { local 'a[$(rm -rf /)]=1'; }; f",
    "a=(1); unset 'a[$(rm -rf /)]'",
    "a=(1); y='($(rm -rf /))'; declare a=\"$y\"",
    "declare -a 'x=($(rm -rf /))'",
    "command declare 'a[$(rm -rf /)]=1'",
    "history -s 'rm -rf /'; fc -s rm",
    "compgen -C 'rm -rf / #' x",
    "compgen -W '$(rm -rf /)' x",
    "f() { rm -rf /; }; compgen -F f x >/dev/null",
    'hash -p "$(command -v rm)" ls; ls -rf /',
    'BASH_CMDS[ls]="$(command -v rm)"; ls -rf /',
    "jobs -x rm -rf /",
    "y='($(rm -rf /))'; f() { for i in 1 2; do local x=\"$y\"; x=(1); done; }; f",
    "y='($(rm -rf /))'; f() { local -a x=\"$y\"; }; f",
    "i='b[$(rm -rf /)]'; a=([$i]=1)",
    "a=(['$(rm -rf /)']=1)",
    "PS4='$((\nrm -rf /\n)\n)'; set -x; true",
    "PS4='$((\nrm -rf /\n)\ntrue)'; set -x; true; set +x",
    "PS4='$((echo a); (rm -rf /))'; set -x; true",
    "x='a[$(rm -rf /)]'; PS4='$((x))'; set -x; true",
]
"""Builtins and assignments that evaluate text the reader never read: aliases, subscripts
(of names given to builtins, and of keys in `a=([KEY]=v)`), the history, completions, the
command table; a prompt whose `$((` does not close as arithmetic, which bash runs as a command
substitution each time it traces a command."""

ALLOW = [
    f"allow bash(command~{name}:*)"
    for name in [
        *("echo", "true", "shopt", "alias", "declare", "typeset", "local", "unset", "command"),
        *("history", "fc", "compgen", "hash", "jobs", "ls", "f", "set"),
    ]
]
"""An allow-list of every command in the tables but `rm` (and `env`, which `allow env:*`
allows with whatever it runs)."""


class TestRedirectedWords(ScriptsRunningRm):
    """A redirection between a command's words hides none of them."""

    scripts = REDIRECTED
    allow = ALLOW

    def test_the_words_are_read_in_order(self) -> None:
        """`rm -r >f -f <g D` is `rm -r -f D`, as bash runs it, read with confidence."""
        script = shell.parse("rm -r >/dev/null -f </dev/null D")
        assert [views[0].words for views in script.commands] == [("rm", "-r", "-f", "D")]
        assert not script.unsure

    def test_a_plain_redirection_is_still_allowed(self) -> None:
        """Common redirections keep an allowed command allowed."""
        rules = ["allow bash(command~ls:*)", "allow bash(command~git status:*)"]
        for command in ("ls -la 2>&1", "ls 2>/dev/null -la", "git status </dev/null"):
            assert verdict(rules, command, permissions={"*": "deny"}) == "allow", command


class TestEvaluatingBuiltins(ScriptsRunningRm):
    """Builtins that evaluate text the reader never reads make the script unsure."""

    scripts = EVALUATING_BUILTINS
    allow = ALLOW


class TestUnmodelled:
    """Each form on an unmodelled list makes a script unsure: denied, never allowed."""

    @pytest.mark.parametrize("name", sorted(BASH_VARIABLES - MODELLED_VARIABLES))
    def test_assigning_an_unmodelled_bash_variable_is_unsure(self, name: str) -> None:
        """Regression (`POSIXLY_CORRECT=1; ls` read with confidence): every way of assigning one
        of bash's own variables that the reader does not model is unsure."""
        allow = ["allow bash(command~ls:*)", "allow bash(command~export:*)"]
        for command in (f"{name}=1; ls", f"export {name}=1", f"{name}=1 ls", f"read {name}"):
            assert shell.parse(command).unsure, command
            assert verdict(allow, command, permissions={"*": "deny"}) == "deny", command

    @pytest.mark.parametrize("name", sorted(MODELLED_VARIABLES - {"PROMPT_COMMAND"}))
    def test_a_modelled_bash_variable_is_read(self, name: str) -> None:
        """A modelled variable given a literal value leaves the script read with confidence."""
        assert not shell.parse(f"{name}=/srv/x; ls").unsure

    @pytest.mark.parametrize("name", sorted(UNMODELLED_BUILTINS))
    def test_an_unmodelled_builtin_is_unsure(self, name: str) -> None:
        """Running an unmodelled builtin, by any route, is unsure: a deny rule denies it and an
        allow rule naming it does not allow it."""
        allow = [f"allow bash(command~{name}:*)", "allow bash(command~builtin:*)"]
        for command in (name, f"builtin {name} x", f"true && {name} -l"):
            assert shell.parse(command).unsure, command
            assert verdict([DENY], command) == "deny"
            assert verdict(allow, command, permissions={"*": "deny"}) == "deny"

    @pytest.mark.parametrize(
        "command",
        [
            'echo $"hello"',  # translated_string
            "echo ${x@P}",  # the P token
            "cat {fd}</dev/null",  # {name}> stores a descriptor in a variable
            "{ ls; } >/dev/null -la",  # words after a compound's redirection
            "set -H",
            "set -o history",
            "set -k",
            "shopt -s extdebug",
            "shopt -s expand_aliases",
            "alias ll='ls -l'",
            "declare -n r=x",
            'local v="$1"',
            "ENV=/tmp/x",
            "env BASHOPTS=localvar_inherit bash -c true",
        ],
    )
    def test_an_unmodelled_form_is_unsure(self, command: str) -> None:
        """A node kind, token, redirection or option the reader does not model is unsure."""
        assert shell.parse(command).unsure

    @pytest.mark.parametrize(
        "command",
        [
            "set -euo pipefail",
            "set -x; ls",
            "set -- a b",
            "shopt -s nullglob globstar",
            "shopt -q extglob",
            "alias",
            'export PATH="$PATH:/opt/bin"',
            "local x=1",
            "declare -a arr=(a b c)",
            'f() { local d="$1"; ls "$d" "${d}/x"; }; f x',
            "unset x y",
            "hash -r",
            "jobs -l",
            "cd /tmp && pwd",
            "type ls",
            "exit 0",
        ],
    )
    def test_modelled_builtins_are_read(self, command: str) -> None:
        """The common forms of the modelled builtins are read with confidence."""
        assert not shell.parse(command).unsure, shell.parse(command).unsure


def _kinds() -> tuple[set[str], set[str]]:
    """The grammar's visible node kinds: named ones and anonymous tokens."""
    language = tree_sitter.Language(tree_sitter_bash.language())
    named: set[str] = set()
    tokens: set[str] = set()
    for kind in range(language.node_kind_count):
        if language.node_kind_is_visible(kind):
            name = language.node_kind_for_id(kind)
            assert name is not None
            (named if language.node_kind_is_named(kind) else tokens).add(name)
    return named, tokens


class TestJoinedArgv:
    """A list argument is read as a joining tool would run it too, unless every word is plain."""

    def test_a_word_not_plain_reads_the_joined_string(self) -> None:
        """`!` and reserved words are not plain: joined, `! rm -rf /` runs rm, so it is denied;
        plain words stay allowed."""
        for argv in (["!", "rm", "-rf", "/"], ["coproc", "rm", "-rf", "/"], ["rm", "#", "-rf"]):
            assert verdict([DENY], argv) == "deny", argv
        rules = ["allow bash(command~git:*)"]
        for argv in (["git", "status"], ["git", "commit", "-m", "fix!"]):
            assert verdict(rules, argv, permissions={"*": "deny"}) == "allow", argv


class TestTheListsAreWhole:
    """Every kind of the grammar and every bash builtin is on exactly one list."""

    def test_every_named_node_kind_is_classified(self) -> None:
        """The grammar's named kinds are the modelled ones and the unmodelled ones."""
        named, _ = _kinds()
        assert not MODELLED_NODES & set(UNMODELLED_NODES)
        assert named == MODELLED_NODES | set(UNMODELLED_NODES)

    def test_every_token_is_classified(self) -> None:
        """The grammar's keywords and operators are the modelled ones and the unmodelled ones."""
        _, tokens = _kinds()
        assert not MODELLED_TOKENS & set(UNMODELLED_TOKENS)
        assert tokens == MODELLED_TOKENS | set(UNMODELLED_TOKENS)

    def test_every_redirection_is_a_token(self) -> None:
        """The modelled redirection operators are tokens of the grammar, modelled."""
        assert REDIRECTIONS <= MODELLED_TOKENS

    @pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
    def test_the_builtins_are_bashs(self) -> None:
        """BASH_BUILTINS is what this bash lists with `compgen -b`."""
        listed = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", "compgen -b"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert set(listed) == BASH_BUILTINS

    def test_every_builtin_is_classified(self) -> None:
        """Each builtin has a handler in the reader or a reason it is not modelled."""
        assert not set(BUILTINS) & set(UNMODELLED_BUILTINS)
        assert set(BUILTINS) | set(UNMODELLED_BUILTINS) == BASH_BUILTINS
        assert set(BUILTINS) >= DATA_BUILTINS


def _listed(label: str) -> set[str]:
    """The names docs/shell-rules.md lists after the bold `label`, up to the next item."""
    page = (DOCS / "shell-rules.md").read_text(encoding="utf-8")
    found = re.search(rf"^- \*\*{re.escape(label)}\*\* (.*?)(?=^- |^$)", page, re.M | re.S)
    assert found is not None, f"docs/shell-rules.md lists no {label!r}"
    return {a or b for a, b in re.findall(r"`` (.+?) ``|`([^`]+)`", found.group(1))}


class TestThePage:
    """docs/shell-rules.md lists exactly what the reader models and what it does not."""

    @pytest.mark.parametrize(
        ("label", "table"),
        [
            ("Node kinds modelled:", MODELLED_NODES),
            ("Node kinds not modelled:", set(UNMODELLED_NODES)),
            ("Tokens not modelled:", set(UNMODELLED_TOKENS)),
            ("Redirection operators modelled:", REDIRECTIONS),
            ("Builtins whose arguments are data:", DATA_BUILTINS),
            ("Builtins read by rules of their own:", set(BUILTINS) - DATA_BUILTINS),
            ("Builtins not modelled:", set(UNMODELLED_BUILTINS)),
            ("`set` flags modelled:", {f"-{letter}" for letter in SET_FLAGS}),
            ("`set -o` names modelled:", SET_OPTIONS),
            ("`shopt` names modelled:", SHOPT_OPTIONS),
            ("Bash variables modelled:", MODELLED_VARIABLES),
        ],
    )
    def test_the_page_lists_the_table(self, label: str, table: set[str]) -> None:
        """The page's list under `label` is the table, no more and no less."""
        assert _listed(label) == set(table)
