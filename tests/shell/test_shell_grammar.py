"""The shell reader against real bash over the whole grammar: when bash runs `rm -rf`, the
verdict of `deny bash(command~rm -rf *)` is deny.

Scripts are built from forms, one at least for every node kind of tree-sitter-bash, every
builtin `bash -c 'compgen -b'` lists and every redirection operator, each holding a slot
for a command: an `rm` with random flags (`-rf`, `-r -f`, `--rec --forc`, `-v`...), a random
spelling of its name and random redirections at random word positions. Each script runs in
a real `bash --norc --noprofile` in a scratch directory (its own cwd and HOME, an empty
environment, no network when `unshare` can take it away, a timeout), with a stand-in for
`rm` first on PATH that logs its arguments and deletes nothing. No form names a path to rm
or changes PATH, and the only operand is `DIR`, inside the scratch directory.

`TestSweep` runs every form and every operator at every position once, deterministically,
prints what it reached, and fails when a node kind, a builtin or an operator position was
never generated. `TestProperty` then draws forms nested in forms with random fillers
(as many examples as the hypothesis profile says; `make test-deep` runs more).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tree_sitter
import tree_sitter_bash
from hypothesis import event, given
from hypothesis import strategies as st

from agentfsm._shell.closed import BASH_BUILTINS, MODELLED_NODES, UNMODELLED_NODES
from tests.shell.rm_scripts import DENY, Tracer, verdict

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

_REAL_RM = ("/rm", "PATH=", "env -i", "env -", "command -p", "exec -c")
"""Spellings that could reach the real rm: a generated script holds none of them."""


def _no_network() -> list[str]:
    """`unshare -rn` when it works here: the script runs without a network."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    return [unshare, "-rn"] if probe.returncode == 0 else []


class Bash(Tracer):
    """Runs scripts in real bash with a traced `rm`; reports the argument lists rm got."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, ["rm"], _no_network())

    def rm_runs(self, script: str, timeout: float = 10.0) -> list[list[str]]:
        """Run `script` in a fresh scratch directory; the arguments of each rm it ran."""
        # The real rm must never run: no path to it, no PATH of the script's own.
        assert not any(risk in script for risk in _REAL_RM), script
        return [args for _, *args in self.run(script + "\nwait", timeout, folders=["DIR"])]


@pytest.fixture(scope="module")
def bash() -> Bash:
    """One runner for the module: its stand-in and log are made once."""
    return Bash(Path(tempfile.mkdtemp(prefix="agentfsm-grammar-")))


def recursive_and_forced(args: list[str]) -> bool:
    """Whether rm's arguments ask for both -r and -f, in any of rm's spellings."""
    flags: set[str] = set()
    for word in args:
        if word == "--":
            break
        if word.startswith("--") and len(word) > 2:
            flags |= {f for f in ("recursive", "force") if f.startswith(word[2:])}
        elif word.startswith("-") and len(word) > 1:
            flags |= {"recursive" for c in word[1:] if c in "rR"}
            flags |= {"force" for c in word[1:] if c == "f"}
    return flags >= {"recursive", "force"}


# --- the command in the slot: rm with random flags, spelling and redirections -------------------

FLAGS = ["-rf", "-fr", "-Rf", "-r", "-f", "-R", "--recursive", "--force", "--rec", "--forc", "-v"]
NAMES = ["rm", "'rm'", '"rm"', "\\rm", "r\\m", "command rm", "env rm", "nice rm"]

REDIRECTIONS = {
    "<": "</dev/null",
    ">": ">/dev/null",
    ">>": ">>/dev/null",
    "&>": "&>/dev/null",
    "&>>": "&>>/dev/null",
    "<&": "<&0",
    ">&": ">&2",
    ">&-": "3>&-",
    "<&-": "4<&-",
    ">|": ">|/dev/null",
    "<<": "<<E",
    "<<-": "<<-E",
    "<<<": "<<<x",
    "<>": "<>/dev/null",
    "2>": "2>/dev/null",
    "{fd}>": "{fd}>/dev/null",
}
"""Every redirection operator of bash, as written before the next word."""

BODIES = {"<<": "x\nE", "<<-": "\tx\n\tE"}
"""The body a heredoc operator needs, on the lines after its command."""


@dataclass(frozen=True)
class Rm:
    """An rm command: its name's spelling, its words (redirections among them, and before the
    name), and the heredoc bodies its redirections need."""

    name: str
    words: tuple[str, ...]
    before: tuple[str, ...] = ()
    bodies: tuple[str, ...] = ()

    def text(self, name: str | None = None) -> str:
        """The command, its heredoc bodies on the lines after it."""
        line = " ".join([*self.before, name or self.name, *self.words])
        return "\n".join([line, *self.bodies])


def redirected(rm: Rm, operator: str, position: int) -> Rm:
    """`rm` with a redirection by `operator` before word `position` (0: before the name)."""
    written = REDIRECTIONS[operator]
    body = BODIES.get(operator)
    bodies = (*rm.bodies, body) if body else rm.bodies
    if position == 0:
        return Rm(rm.name, rm.words, (*rm.before, written), bodies)
    words = list(rm.words)
    words.insert(min(position - 1, len(words)), written)
    return Rm(rm.name, tuple(words), rm.before, bodies)


def _quotings(word: str) -> list[str]:
    """Ways to write `word` that bash reads as the same word."""
    return [word, f"'{word}'", f'"{word}"', f"{word[:2]}'{word[2:]}'", "\\" + word]


@st.composite
def rms(draw: st.DrawFn) -> Rm:
    """An rm with random flags, name spelling and up to two redirections anywhere."""
    flags = draw(st.lists(st.sampled_from(FLAGS), min_size=1, max_size=3))
    quoted = [draw(st.sampled_from(_quotings(flag))) for flag in flags]
    rm = Rm(draw(st.sampled_from(NAMES)), (*quoted, "DIR"))
    for _ in range(draw(st.integers(0, 2))):
        operator = draw(st.sampled_from(sorted(REDIRECTIONS)))
        rm = redirected(rm, operator, draw(st.integers(0, len(rm.words) + 1)))
        event(f"redirection {operator}")
    return rm


# --- the forms: one for every node kind, builtin and construct --------------------------------

Q = "{q}"
"""In a form: the command as one quoted word."""
SUB = "{sub}"
"""In a form: `a[$(command)]` as one quoted word, a subscript bash evaluates as arithmetic."""


@dataclass(frozen=True)
class Form:
    """A script with a slot: `{cmd}` (the command, on lines of its own), `{q}`, `{sub}`,
    `{substituted}` (`$(command)` as one quoted word), or `{r}` (the rm command with its name
    replaced: for aliases and the command table)."""

    name: str
    text: str
    renamed: str | None = None
    """For `{r}`: the name the command is given."""
    simple: bool = False
    """Whether the slot takes only a simple command (a prefix like `exec`)."""

    def fill(self, inner: str | Rm) -> str:
        """The form with `inner` (a script, or an rm command) in its slot."""
        text = inner.text() if isinstance(inner, Rm) else inner
        renamed = inner.text(self.renamed) if isinstance(inner, Rm) and self.renamed else text
        return (
            self.text.replace("{q}", shlex.quote(text))
            .replace("{sub}", shlex.quote(f"a[$({text}\n)]"))
            .replace("{substituted}", shlex.quote(f"$({text}\n)"))
            .replace("{r}", renamed)
            .replace("{cmd}", text)
        )


def _forms() -> list[Form]:
    """The forms of the grammar's constructs, then one for every builtin."""
    structure = {
        "list": "true &&\n{cmd}",
        "or": "false ||\n{cmd}",
        "pipeline": "echo a |\n{cmd}",
        "pipe stderr": "echo a |&\n{cmd}",
        "negated": "! {\n{cmd}\n}",
        "subshell": "(\n{cmd}\n)",
        "group": "{\n{cmd}\n}",
        "redirected group": "{\n{cmd}\n} >/dev/null",
        "if": "if false; then :\nelif true; then\n{cmd}\nelse :\nfi",
        "for": "for i in a; do\n{cmd}\ndone",
        "c-style for": "for ((i = 0; i < 1; i++)); do\n{cmd}\ndone",
        "select": "echo 1 >in\nselect x in a; do\n{cmd}\nbreak\ndone <in",
        "compound here-string": "while read -r x; do\n{cmd}\ndone <<< 1",
        "while": "while true; do\n{cmd}\nbreak\ndone",
        "until": "until false; do\n{cmd}\nbreak\ndone",
        "case": "case a in\nb) :\n;;\na)\n{cmd}\n;;\nesac",
        "case fall-through": "case a in a) :\n;&\nb)\n{cmd}\n;;&\n*) :\n;;\nesac",
        "function": "f() {\n{cmd}\n}\nf",
        "function keyword": "function g {\n{cmd}\n}\ng",
        "comment": "# a comment\n{cmd}",
        "background": "{\n{cmd}\n} &\nwait",
        "coproc": "coproc {\n{cmd}\n}\nwait",
        "time": "time {\n{cmd}\n}",
        "$( )": "echo $(\n{cmd}\n)",
        "` `": "echo `{cmd}`",
        "<( )": "cat <(\n{cmd}\n)",
        ">( )": "echo a > >(\n{cmd}\n)\nwait",
        "x=$( )": "x=$(\n{cmd}\n)",
        "heredoc $( )": "cat <<EOF\n$(\n{cmd}\n)\nEOF",
        "${x:-$( )}": "echo ${x:-$(\n{cmd}\n)}",
        "$(( $( ) ))": "echo $(( $(\n{cmd}\n) + 1 ))",
        "[[ $( ) ]]": "[[ -n $(\n{cmd}\n) ]]",
        "array": 'a=(x y)\necho ${a[0]} ${#a[@]} "${a[@]:0:1}"\n{cmd}',
        "array of words": "a=(" + Q + ')\neval "${a[0]}"',
        "keyed array": "i=" + SUB + "\na=([$i]=1)",
        "prompt expansion": 'x={substituted}\necho "${x@P}"',
        "PS4": "PS4={substituted}\nset -x\ntrue",
        "indirect": "x=" + SUB + "\ny=x\necho ${!y} $(( y ))",
        "words": "x=1 y=2\necho a\"b\"'c' $'d' {1..2} $? $# $x ${x:-y} ${x#*} $((x + 1))\n{cmd}",
        "arithmetic": "i=0\n(( i++ ))\necho $(( i ? 1 : 0 )) $(( (i + 1) * 2 ))\n{cmd}",
        "tests": "[[ -n a && a == @(a|b) && a =~ ^a ]] && [ -n a ]\n{cmd}",
        "translated": 'x=$"hello"\n{cmd}',
        "translated word": 'echo $"hello"\n{cmd}',
        "assignments": "A=1 B=2\nA=1 {cmd}",
        "heredoc": "cat <<EOF\nhello $HOME\nEOF\ncat <<'EOF'\n$(x)\nEOF\n{cmd}",
        "herestring": "cat <<< a\n{cmd}",
        "fd redirect": "exec 3>/dev/null\necho a 2>&1 >&3\n{cmd}",
        "bash -c": "bash -c " + Q,
        "sh <<": "sh <<'EOF'\n{cmd}\nEOF",
        "bash here-string": "bash <<< " + Q,
        "alias": "shopt -s expand_aliases\nalias r=rm\n{r}",
        "alias with flags": "shopt -s expand_aliases\nalias r='rm -v'\n{r}",
        "BASH_ALIASES": "shopt -s expand_aliases\nBASH_ALIASES[r]=rm\n{r}",
        "BASH_CMDS": 'BASH_CMDS[r]="$(command -v rm)"\n{r}',
    }
    forms = [Form(n, t, renamed="r" if "{r}" in t else None) for n, t in structure.items()]
    return forms + _builtin_forms()


def _builtin_forms() -> list[Form]:
    """A form for every bash builtin, most of them with the builtin evaluating the command."""
    uses = {
        ".": ". /dev/stdin <<'EOF'\n{cmd}\nEOF",
        "source": "source /dev/stdin <<< " + Q,
        ":": ": " + Q + "\n{cmd}",
        "[": "[ -v " + SUB + " ]",
        "alias": "shopt -s expand_aliases\nalias r=" + Q + "\nr",
        "bg": "sleep 0 &\nbg 2>/dev/null\n{cmd}",
        "bind": "bind -x '\"\\C-x\": true' 2>/dev/null\n{cmd}",
        "break": "for i in 1; do\n{cmd}\nbreak\ndone",
        "builtin": "builtin eval " + Q,
        "caller": "caller\n{cmd}",
        "cd": "cd .\n{cmd}",
        "command": "command eval " + Q,
        "compgen -C": "compgen -C " + Q + " x",
        "compgen -W": "compgen -W " + SUB + " x",
        "compgen -F": "f() {\n{cmd}\n}\ncompgen -F f x",
        "complete": "complete -C " + Q + " x\n{cmd}",
        "compopt": "compopt -o default x 2>/dev/null\n{cmd}",
        "continue": "for i in 1; do\n{cmd}\ncontinue\ndone",
        "declare": "declare " + SUB + "=1",
        "declare -a": 'y="("{substituted}")"\ndeclare -a a="$y"',
        "local in a loop": (
            'y="("{substituted}")"\nf() {\nfor i in 1 2; do\nlocal x="$y"\nx=(1)\ndone\n}\nf'
        ),
        "dirs": "dirs\n{cmd}",
        "disown": "disown 2>/dev/null\n{cmd}",
        "echo": "echo " + Q + "\n{cmd}",
        "enable": "enable -n echo\n{cmd}",
        "eval": "eval " + Q,
        "exec": "exec {cmd}",
        "exit": "{cmd}\nexit 0",
        "export": "export x=1\n{cmd}",
        "false": "false ||\n{cmd}",
        "fc": "history -s " + Q + "\nfc -s",
        "fg": "fg 2>/dev/null\n{cmd}",
        "getopts": "getopts a x\n{cmd}",
        "hash": 'hash -p "$(command -v rm)" r\n{r}',
        "help": "help : >/dev/null\n{cmd}",
        "history": "history -s " + Q + "\nfc -s",
        "jobs": "jobs -x {cmd}",
        "kill": "kill -0 $$\n{cmd}",
        "let": "let " + SUB,
        "local": "f() { local " + SUB + "=1; }\nf",
        "logout": "{cmd}\nlogout 2>/dev/null",
        "mapfile": "mapfile -C " + Q + " -c 1 < <(echo a)",
        "popd": "pushd . >/dev/null\npopd >/dev/null\n{cmd}",
        "printf": "printf -v " + SUB + " x",
        "pushd": "pushd . >/dev/null\n{cmd}",
        "pwd": "pwd\n{cmd}",
        "read": "read " + SUB + " <<< 1",
        "readarray": "readarray -C " + Q + " -c 1 < <(echo a)",
        "readonly": "readonly x=1\n{cmd}",
        "return": "f() {\n{cmd}\nreturn\n}\nf",
        "set": "set -e -o pipefail\n{cmd}",
        "shift": "shift\n{cmd}",
        "shopt": "shopt -s nullglob\n{cmd}",
        "suspend": "false && suspend\n{cmd}",
        "test": "test -v " + SUB,
        "times": "times\n{cmd}",
        "trap": "trap " + Q + " EXIT",
        "true": "true &&\n{cmd}",
        "type": "type rm >/dev/null\n{cmd}",
        "typeset": "typeset " + SUB + "=1",
        "ulimit": "ulimit -n >/dev/null\n{cmd}",
        "umask": "umask 022\n{cmd}",
        "unalias": "unalias -a\n{cmd}",
        "unset": "a=(1)\nunset " + SUB,
        "wait": "{\n{cmd}\n} &\nwait",
    }
    simple = {"exec", "jobs", "hash"}
    return [
        Form(
            f"builtin {name}",
            text,
            renamed="r" if "{r}" in text else None,
            simple=name in simple,
        )
        for name, text in uses.items()
    ]


FORMS = _forms()
NESTING = [f for f in FORMS if not f.simple and f.renamed is None]
"""Forms whose slot takes any script: they can hold another form."""


# --- coverage ----------------------------------------------------------------------------------


@dataclass
class Coverage:
    """What the generated scripts reached: node kinds, builtins, operators at positions."""

    kinds: Counter[str] = field(default_factory=Counter)
    builtins: Counter[str] = field(default_factory=Counter)
    operators: Counter[tuple[str, int]] = field(default_factory=Counter)

    def add(self, script: str) -> None:
        """Count the node kinds of `script`'s parse and the builtins it names."""
        for node in _nodes(script):
            if node.is_named:
                self.kinds[node.type] += 1
            if node.type in ("command_name", "declaration_command", "unset_command"):
                word = node.text.decode().split()[0] if node.text else ""
                if word in BASH_BUILTINS:
                    self.builtins[word] += 1
            elif node.type == "test_command" and node.children[0].type == "[":
                self.builtins["["] += 1  # the grammar reads `[ ... ]` as a test, bash as a builtin

    def report(self) -> str:
        """What was reached, against what there is to reach."""
        kinds = MODELLED_NODES | set(UNMODELLED_NODES)
        return (
            f"node kinds: {len(set(self.kinds) & kinds)}/{len(kinds)}, "
            f"builtins: {len(set(self.builtins))}/{len(BASH_BUILTINS)}, "
            f"operator positions: {len(self.operators)}/{len(REDIRECTIONS) * 4}"
        )


_PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _nodes(script: str) -> Iterator[tree_sitter.Node]:
    """Every node of `script`'s parse."""
    stack = [_PARSER.parse(script.encode()).root_node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _check(bash: Bash, script: str) -> str | None:
    """What is wrong with the verdict on `script`, or None: bash ran rm -rf and it allowed it."""
    runs = [args for args in bash.rm_runs(script) if recursive_and_forced(args)]
    if runs and verdict([DENY], script) != "deny":
        return f"bash ran rm {runs[0]} and the verdict is not deny: {script!r}"
    return None


def _sweep() -> Iterator[tuple[str, str, tuple[str, int] | None]]:
    """Every form around a plain rm, and every operator at every position of a plain rm."""
    plain = Rm("rm", ("-rf", "DIR"))
    for form in FORMS:
        yield form.name, form.fill(plain), None
    alias = Form("alias", "shopt -s expand_aliases\nalias r=rm\n{r}", renamed="r")
    for operator in sorted(REDIRECTIONS):
        for position in range(4):  # before the name, after it, between the words, at the end
            for flags in (("-rf",), ("-fr",), ("-r", "-f")):  # the grammar reads them apart
                rm = redirected(Rm("rm", (*flags, "DIR")), operator, position)
                yield f"{operator} at {position}", rm.text(), (operator, position)
            rm = redirected(plain, operator, position)
            yield f"{operator} at {position} (alias)", alias.fill(rm), (operator, position)


class TestSweep:
    """Every form, builtin and operator position, once: each script rm -rf runs in is denied."""

    def test_every_form_is_denied_when_rm_rf_runs(self, bash: Bash) -> None:
        """The verdict is deny for every script of the sweep that runs rm -rf; the sweep
        reaches every node kind of the grammar, every builtin and every operator position."""
        coverage = Coverage()
        wrong: list[str] = []
        ran = 0
        for _, script, operator in _sweep():
            coverage.add(script)
            if operator is not None:
                coverage.operators[operator] += 1
            runs = [args for args in bash.rm_runs(script) if recursive_and_forced(args)]
            ran += bool(runs)
            if runs and verdict([DENY], script) != "deny":
                wrong.append(f"bash ran rm {runs[0]}, not denied: {script!r}")
        print(f"sweep: {coverage.report()}; rm -rf ran in {ran} scripts")
        assert not wrong, "\n".join(wrong)
        kinds = MODELLED_NODES | set(UNMODELLED_NODES)
        assert kinds <= set(coverage.kinds), f"never generated: {kinds - set(coverage.kinds)}"
        missing = BASH_BUILTINS - set(coverage.builtins)
        assert not missing, f"builtins never generated: {sorted(missing)}"
        assert len(coverage.operators) == len(REDIRECTIONS) * 4

    def test_the_property_can_fail(self, bash: Bash) -> None:
        """The check finds a script bash runs rm -rf for that a reader let through; here, one
        the reader is not asked about (`allow` for everything) stands in."""
        script = "rm >/dev/null -rf DIR"
        assert any(recursive_and_forced(a) for a in bash.rm_runs(script))
        assert verdict(["allow bash(command~rm:*)"], script) == "allow"
        assert recursive_and_forced(["-r", "--forc", "DIR"])
        assert not recursive_and_forced(["-r", "--", "-f"])


@st.composite
def scripts(draw: st.DrawFn) -> str:
    """An rm (random flags, spelling, redirections) in up to three nested random forms."""
    rm = draw(rms())
    form = draw(st.sampled_from(FORMS))
    event(f"form {form.name}")
    text = form.fill(rm)
    for _ in range(draw(st.integers(0, 2))):
        outer = draw(st.sampled_from(NESTING))
        event(f"form {outer.name}")
        text = outer.fill(text)
    return text


class TestProperty:
    """Random nests of forms with random commands: when bash runs rm -rf, the verdict is deny."""

    @given(data=st.data())
    def test_rm_rf_that_runs_is_denied(self, bash: Bash, data: st.DataObject) -> None:
        """Whatever bash ran rm with -r and -f for, a deny rule on rm -rf denied."""
        script = data.draw(scripts(), label="script")
        problem = _check(bash, script)
        assert problem is None, problem
