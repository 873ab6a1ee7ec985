"""The shell reader against real bash: every command bash runs is one the reader saw.

Scripts are generated from a grammar of the spellings the shell rules promise to read
(wrappers with their options, compound commands, substitutions, heredocs, arithmetic,
quoting). Each is run by a real `bash --norc --noprofile` in a scratch directory, with an
empty environment and a PATH whose first directory holds traced stand-ins for a few
programs (`rm`, `git`, `touch`, `mv`): each appends its arguments to a log and does
nothing else, so nothing is deleted. The real wrappers run (`env`, `xargs`, `flock`,
`timeout`, `nice`, GNU `time`, ...), so their own reading of their options is what is
tested. Then each logged run must be a view of a simple command of `shell.parse(script)`
with the same name and arguments (a word the reader knows only at run time stands for any
words), or the reader must have called the script unsure.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from agentfsm import _shell as shell
from agentfsm._shell.wrappers import Word, base_name
from tests.shell.rm_scripts import Tracer

TRACED = ("rm", "git", "touch", "mv")
"""Programs replaced by stand-ins that log their arguments (all exist in /bin too: a wrapper
that searches its own PATH, as `env -i` does, runs the real one on harmless words)."""

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or not Path("/usr/bin/env").exists(),
    reason="needs bash and the GNU user tools",
)


@dataclass(frozen=True)
class Run:
    """A command a stand-in logged: its name and arguments."""

    name: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return shlex.join([self.name, *self.args])


def traced(tracer: Tracer, text: str) -> list[Run]:
    """The traced commands bash ran for `text`."""
    return [Run(name, tuple(args)) for name, *args in tracer.run(text)]


@pytest.fixture(scope="module")
def tracer() -> Tracer:
    root = Path(tempfile.mkdtemp(prefix="agentfsm-bash-"))
    return Tracer(root, TRACED)


def _words_match(words: Sequence[Word], args: Sequence[str]) -> bool:
    """Whether `args` is what `words` can become: a None word may become any words."""
    if not words:
        return not args
    head, rest = words[0], words[1:]
    if head is None:
        return any(_words_match(rest, args[i:]) for i in range(len(args) + 1))
    return bool(args) and args[0] == head and _words_match(rest, args[1:])


def seen(script: shell.Script, run: Run) -> bool:
    """Whether a view of a simple command of `script` is `run`."""
    return any(
        view.words[0] is not None
        and base_name(view.words[0]) == run.name
        and _words_match(view.words[1:], run.args)
        for views in script.commands
        for view in views
    )


def unseen(tracer: Tracer, text: str) -> list[Run]:
    """The commands bash ran for `text` that the reader did not see (none when unsure)."""
    runs = traced(tracer, text)
    script = shell.parse(text)
    if script.unsure:
        return []
    return [run for run in runs if not seen(script, run)]


# --- the grammar --------------------------------------------------------------------------------

ARGS = ["a", "b", "-rf", "-f", "-r", "DIR", "x y", "--", "{}", "-n"]


@st.composite
def spelled(draw: st.DrawFn, word: str, name: bool = False) -> str:
    """`word` as the shell reads it, in one of the spellings bash accepts."""
    forms = [
        shlex.quote(word),
        f"'{word}'",
        '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"',
    ]
    if not name:  # the reader reads a name spelled `$'rm'` as unknown: unsure, as documented
        forms.append("$'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'")
    if word and word.isalnum():
        forms.append(f"'{word[:1]}'\"{word[1:]}\"")
        # `\\r\\m`: glued by the grammar to the line before it, which the reader calls unsure
        forms.append("".join("\\" + c for c in word))
        forms.append(f"{word[:1]}\\\n{word[1:]}")  # a backslash-newline inside the word
    return draw(st.sampled_from(forms))


@st.composite
def leaf(draw: st.DrawFn) -> str:
    """A traced command with a few arguments, each in some spelling."""
    name = draw(st.sampled_from(TRACED))
    args = draw(st.lists(st.sampled_from(ARGS), max_size=3))
    return " ".join([draw(spelled(name, name=True)), *[draw(spelled(a)) for a in args]])


def _wrapper_forms(bin_dir: str) -> list[st.SearchStrategy[str]]:
    """Option spellings of wrappers in front of a command (a `{}` marks where it goes)."""
    env = st.lists(
        st.sampled_from(
            [
                "-u FOO",
                "--unset=FOO",
                "-C .",
                "--chdir .",
                "-v",
                "--debug",
                f"-i PATH={bin_dir}",
                f"- PATH={bin_dir}",
                "--block-signal",
                "--ignore-signal=INT",
                "--",
            ]
        ),
        max_size=2,
    )
    assignments = st.lists(
        st.sampled_from(["FOO=1", "'a b=1'", "1=1", "=1", "'x-y=2'"]), max_size=2
    )
    xargs_options = st.lists(
        st.sampled_from(
            [
                "-l",
                "-l1",
                "-L 1",
                "-L1",
                "-n 1",
                "-n1",
                "--max-args=1",
                "-P 1",
                "-d ,",
                "-E END",
                "-e",
                "-eEND",
                "-s 1000",
                "-r",
                "-x",
                "--max-lines",
                "--no-run-if-empty",
            ]
        ),
        max_size=3,
    )
    return [
        st.builds(lambda o, a: " ".join(["env", *o, *a, "{}"]), env, assignments),
        st.builds(lambda o: "printf 'a\\n' | " + " ".join(["xargs", *o, "{}"]), xargs_options),
        # Never waiting for the lock: a flock inside a flock on the same file would wait forever.
        st.sampled_from(
            ["flock -n lk {}", "flock -n -w 5 lk {}", "flock -ns -- lk {}", "flock --nb lk {}"]
        ),
        st.sampled_from(["timeout 5 {}", "timeout -k 1 -s TERM 5 {}", "timeout --foreground 5 {}"]),
        st.sampled_from(["nice {}", "nice -n 1 {}", "nice --adjustment=1 {}", "nice -1 {}"]),
        st.sampled_from(["nohup {}", "command {}", "command -- {}", "stdbuf -oL {}"]),
        st.sampled_from(["stdbuf --output=0 -e 0 {}", "setsid -w {}", "ionice -c 3 {}"]),
        st.sampled_from(["time {}", "time -p {}", "command time -p {}", "/usr/bin/time -q {}"]),
        st.sampled_from(["/usr/bin/time -f '' -o /dev/null {}", "env time -a -o /dev/null {}"]),
    ]


@st.composite
def xargs_replacing(draw: st.DrawFn) -> str:
    """`xargs -I`/`-i`/`--replace`: the input's words go where the string stands."""
    option, text = draw(
        st.sampled_from(
            [("-I X", "X"), ("-IX", "X"), ("-i", "{}"), ("-iQ", "Q"), ("--replace", "{}")]
        )
    )
    name = draw(st.sampled_from(TRACED))
    args = draw(st.lists(st.sampled_from(["-rf", text, f"p{text}", "DIR"]), max_size=3))
    after = draw(st.sampled_from(["", " -n 1", " -L 1", " -l"]))
    return f"printf 'a\\n' | xargs {option}{after} {name} {' '.join(args)}"


@st.composite
def simple(draw: st.DrawFn, bin_dir: str) -> str:
    """A traced command, maybe behind one or two wrappers."""
    text = draw(leaf())
    for _ in range(draw(st.integers(0, 2))):
        form = draw(st.one_of(_wrapper_forms(bin_dir)))
        if "|" in form and "|" in text:
            continue  # one pipe into xargs at a time keeps the input simple
        text = form.replace("{}", text)
    return draw(st.one_of(st.just(text), xargs_replacing()))


def _forms(text: str) -> dict[str, str]:
    """Named forms that run `text`: as command text of its own, in a compound command or in
    a substitution, each by name (the name is reported as a hypothesis event)."""
    quoted = shlex.quote(text)
    index = shlex.quote(f"a[$({text})]")  # an array subscript: arithmetic runs $( )
    substituted = shlex.quote(f"$({text})")
    return {
        "eval": f"eval {quoted}",
        "eval --": f"eval -- {quoted}",
        "sh -c": f"sh -c {quoted}",
        "bash -c": f"bash -c {quoted} zero",
        "bash -ec": f"bash -ec {quoted}",
        "flock -c": f"flock -n lk -c {quoted}",
        "trap --": f"trap -- {quoted} EXIT",
        "bash heredoc": f"bash <<'EOF'\n{text}\nEOF",
        "sh here-string": f"sh <<< {quoted}",
        "xargs sh -c": f"printf 'a\\n' | xargs -I{{}} sh -c {shlex.quote(text + ' {}')}",
        "braces": f"{{\n{text}\n}}",
        "subshell": f"(\n{text}\n)",
        "if": f"if true; then\n{text}\nfi",
        "for": f"for i in a; do\n{text}\ndone",
        "while": f"while true; do\n{text}\nbreak; done",
        "case": f"case a in a)\n{text}\n;; esac",
        "function": f"f() {{\n{text}\n}}; f",
        "$( )": f"echo $(\n{text}\n)",
        '"$( )"': f'echo "$(\n{text}\n)"',
        "<( )": f"cat <(\n{text}\n)",
        "x=$( )": f"x=$(\n{text}\n)",
        "! { }": f"! {{\n{text}\n}}",
        "$(( $( ) ))": f"echo $(( $(\n{text}\n) + 1 ))",
        "(( $( ) ))": f"(( 1 + $(\n{text}\n) ))",
        "find -exec": f"find . -maxdepth 0 -exec sh -c {quoted} \\;",
        # Spellings of issue 30's items 7 and 10, read by the reader's own rules.
        "time { }": f"time {{\n{text}\n}}",
        "coproc { }": f"coproc {{\n{text}\n}}; wait",
        "${x:-` `}": f"echo ${{x:-`{text}`}}",
        "heredoc $( )": f"cat <<EOF\n$(\n{text}\n)\nEOF",
        "heredoc ` `": f"cat <<EOF\n`{text}`\nEOF",
        "(( a[$( )] ))": f"x={index}; (( x ))",
        "let": f"let {index}",
        "declare -i": f"declare -i n={index}",
        "printf -v": f"printf -v {index} x",
        "test -v": f"test -v {index}",
        "${x@P}": f"x={substituted}; echo ${{x@P}}",
        "PS4": f"PS4={substituted}; set -x; true; set +x",
        "mapfile -C": f"printf 'a\\n' | mapfile -C {quoted} -c 1",
        "bash /dev/stdin": f"bash /dev/stdin <<'EOF'\n{text}\nEOF",
        "source /dev/stdin": f"source /dev/stdin <<'EOF'\n{text}\nEOF",
    }


def _joined(draw: st.DrawFn, parts: list[str]) -> str:
    text = parts[0]
    for part in parts[1:]:
        joiner = draw(st.sampled_from(["\n", "; ", " && ", " || ", " | "]))
        if "<<" in text:
            joiner = "\n"  # a heredoc's body follows its line
        text += joiner + part
    return text


@st.composite
def scripts(draw: st.DrawFn, bin_dir: str, depth: int = 2) -> str:
    """A script of one to three parts, each a command or a form holding a smaller script."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        text = draw(simple(bin_dir))
        if depth > 0 and draw(st.booleans()):
            inner = draw(scripts(bin_dir, depth - 1))
            forms = _forms(inner)
            name = draw(st.sampled_from(sorted(forms)))
            event(f"form {name}")
            text = forms[name]
        parts.append(text)
    return _joined(draw, parts)


class TestAgainstBash:
    """Generated scripts run by real bash: the reader saw every command that ran."""

    @given(data=st.data())
    def test_every_command_bash_runs_is_seen(self, tracer: Tracer, data: st.DataObject) -> None:
        """Each traced run is a view of a command of the parsed script, or it is unsure."""
        text = data.draw(scripts(str(tracer.bin)), label="script")
        missed = unseen(tracer, text)
        event("unsure" if shell.parse(text).unsure else "read")
        assert not missed, f"bash ran {[str(m) for m in missed]} unseen in {text!r}"

    def test_the_stand_ins_log_what_runs(self, tracer: Tracer) -> None:
        """The harness itself: a stand-in logs its arguments, and nothing else is logged."""
        runs = traced(tracer, "rm -rf 'x y' DIR; echo rm a; printf 'a\\n' | xargs git")
        assert [str(r) for r in runs] == ["rm -rf 'x y' DIR", "git a"]

    def test_a_misread_command_is_found(self, tracer: Tracer) -> None:
        """The comparison fails on a run the reader did not see (here a wrong argument)."""
        script = shell.parse("rm a")
        assert seen(script, Run("rm", ("a",)))
        assert not seen(script, Run("rm", ("-rf", "a")))
        assert not seen(script, Run("git", ("a",)))
