"""Reads a shell script's syntax tree into the views of its simple commands (see `shell`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Any

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
from agentfsm._shell.script import MAX_DEPTH, MAX_LENGTH, Command, Script
from agentfsm._shell.text import (
    INTEGER_SPECIALS,
    Variables,
    backquoted,
    is_integer,
    joins_word,
    runs_substitution,
)
from agentfsm._shell.wrappers import (
    PLAIN,
    SU,
    WATCH,
    WRAPPERS,
    UnreadableError,
    Word,
    Wrapper,
)
from agentfsm._shell.wrappers import base_name as _base

__all__ = ["Reader"]


@lru_cache(maxsize=1)
def _parser() -> Any:
    # Imported here: only a policy with a shell rule pays for the grammar.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


_OPENERS = frozenset(b"{ ( (( [[ ! if while until for case select function time coproc".split())
_PREFIX_HINT = re.compile(rb"!|\btime\b|\bcoproc\b")


def _parse(copy: bytes) -> Any:
    """The syntax tree of `copy`, read again with misread reserved words blanked.

    tree-sitter-bash reads `! { ...; }`, `time { ...; }`, `time while ...` and
    `coproc [NAME] { ...; }` as a command named `!`, `time` or `coproc`, hiding the
    commands of the compound after it. Bash runs them: blanking the reserved words
    (same length, so byte offsets hold) leaves the compound for the grammar to read.
    None when they are still there after `MAX_DEPTH` rounds.
    """
    for _ in range(MAX_DEPTH):
        root = _parser().parse(copy).root_node
        spans = list(_reserved_prefixes(root, copy)) if _PREFIX_HINT.search(copy) else []
        if not spans:
            return root
        blanked = bytearray(copy)
        for start, end in spans:
            blanked[start:end] = b" " * (end - start)
        copy = bytes(blanked)
    return None


def _reserved_prefixes(root: Any, copy: bytes) -> Iterator[tuple[int, int]]:
    """The byte spans of `!`, `time [-p]` and `coproc [NAME]` read as a command's name."""
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.named_children)
        if node.type == "negated_command" and node.children[0].type == "!":
            inner = node.named_children[0] if node.named_children else None
            if inner is not None and _name_text(inner, copy) in _OPENERS:
                yield node.children[0].start_byte, node.children[0].end_byte
        elif node.type == "command":
            yield from _prefix(node, copy)


def _name_text(node: Any, copy: bytes) -> bytes | None:
    name = node.child_by_field_name("name") if node.type == "command" else None
    return None if name is None else copy[name.start_byte : name.end_byte]


def _prefix(command: Any, copy: bytes) -> Iterator[tuple[int, int]]:
    """The span of a reserved word read as `command`'s name, and of its `-p` or NAME."""
    word = _name_text(command, copy)
    if word not in (b"!", b"time", b"coproc"):
        return
    start = command.child_by_field_name("name").start_byte
    args = command.children_by_field_name("argument")[:3]
    texts = [copy[a.start_byte : a.end_byte] for a in args]
    skip = 1 if word == b"time" and texts[:1] == [b"-p"] else 0
    if word == b"coproc" and len(texts) > 1 and texts[1] in _OPENERS:
        skip = 1  # `coproc NAME { ...; }`
    end = args[skip - 1].end_byte if skip else command.child_by_field_name("name").end_byte
    if word == b"!" or (skip < len(texts) and texts[skip] in _OPENERS):
        yield start, end


def _in_code(root: Any, at: int) -> bool:
    """Whether byte `at` of the script is read as code (not in quotes, a comment or a heredoc)."""
    node = root.descendant_for_byte_range(at, at + 1)
    while node is not None:
        if node.type in ("comment", "raw_string", "ansi_c_string", "string", "heredoc_body"):
            return False
        if node.type in ("command_substitution", "process_substitution"):
            return True
        node = node.parent
    return True


_GLOB = re.compile(r"(?<!\\)(?:\\\\)*[*?\[]")
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_BARE_NEWLINE = re.compile(r"(?<!\\)(?:\\\\)*\n")
"""A newline no backslash escapes: it ends a command in bash, never sits inside a word."""
_IN_QUOTES = re.compile(r'\\([\\"$`\n])')
_EVALUATED = frozenset(
    {
        "variable_assignment",
        "arithmetic_expansion",
        "compound_statement",
        "c_style_for_statement",
        "for_statement",
        "subscript",
        "expansion",
        "binary_expression",
        "unary_expression",
        "array",
    }
)
"""Nodes whose text bash evaluates: arithmetic, expansions, assignments, `[[ ]]` tests."""
_SUBSCRIPTED = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*\[([A-Za-z0-9_ +*/%<>&|^!~?:()-]*)\](?:\+?=.*)?", re.S
)
"""`NAME[SUB]` or `NAME[SUB]=VALUE` whose subscript is plain arithmetic."""
_KEYED = re.compile(r"\[(.*)\]\+?=", re.DOTALL)
"""An element `[SUB]=value` of a compound array assignment."""
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]$`'\"\\]*\])?")
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_LISTS_NAMES = re.compile(r"(?:\[[@*]\]|[@*])\}$")
_INERT_BUILTINS = frozenset(
    {":", "true", "false", "echo", "printf", "test", "[", "pwd", "type", "help", "times"}
    | {"jobs", "wait", "kill", "return", "exit", "break", "continue", "logout", "caller"}
    | {"dirs", "bg", "fg", "disown", "suspend", "shift", "eval", "trap", "builtin"}
    | {"command", "exec", "let", "read", "mapfile", "readarray", "getopts"}
)
"""The builtins known to leave the variables, the directory and the way names are found as
they were for the commands after them. Their own ways of setting a variable are recorded
where they are read (`printf -v`, `read`, `mapfile`, `getopts` name one; `let` is arithmetic;
`eval` and `trap` text is read as a script; `builtin`, `command` and `exec` are wrappers of
the command they run). Any other builtin (`cd`, `export`, `unset`, `source`, `hash -p`,
`umask`, `alias`, `shopt`, ...) may change what later commands do: a closed list, so a
builtin not on it is never taken as inert. `set` is inert only with `_INERT_SET_*` options."""
_INERT_SET_FLAGS = re.compile(r"[-+][eux]*")
_INERT_SET_NAMES = frozenset({"errexit", "nounset", "xtrace", "pipefail"})
"""`set` options that change only how the script itself runs (`set -eu`, `set -o pipefail`):
not `-a` (every later assignment exported), `-k` (assignments anywhere in a command's words
go to its environment) or the others."""
_ASSIGNS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
"""A wrapper's word that sets a variable for the command it runs (`sudo X=1 cmd`)."""
_COPROC = re.compile(rb"\bcoproc\b")
_ARITHMETIC_SETS = re.compile(r"\+\+|--|<<=|>>=|(?<![=!<>])=(?!=)")
"""Arithmetic that may store into a variable: `=`, `+=`, `<<=`... (not `==`, `!=`, `<=`,
`>=`), `++` and `--` (read loosely: `1--1` counts; a false alarm only asks)."""
_DEFAULT_ASSIGNS = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\[[^]]*\])?:?=")
"""`${X=v}` and `${X:=v}` assign `v` to `X` when it is unset (or empty)."""
_SUBSTRING = re.compile(
    r"\$\{#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*])(?:\[[^\]]*\])?:(?![-=?+])(.*)\}", re.DOTALL
)
_TEXT_LEAVES = frozenset({"word", "string_content", "regex", "extglob_pattern"})
"""Nodes whose text bash may expand though the grammar did not split it."""
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_FD_NAME = re.compile(rb"\{[^{}]+\}")
_OWNS_REDIRECTS = frozenset({"command", "redirected_statement", "heredoc_redirect"})
_DUPS = frozenset({">&", "<&", ">&-", "<&-"})
_CLOSES = frozenset({">&-", "<&-"})


_COMMAND_TABLES = re.compile(r"BASH_(?:ALIASES|CMDS)")
"""Bash's alias and command-path tables: a name set in them runs other text or another program
(`BASH_CMDS[ls]=/bin/rm; ls -rf x` runs rm), however the name is assigned."""

_WORD_LETTERS = "zqxjkvwyZQXJKVWY"


def _ascii_copy(text: str, data: bytes) -> bytes:
    """`data` with each non-ASCII character replaced by as many bytes of one ASCII letter.

    tree-sitter-bash 0.25 crashes the process on some characters outside the basic
    plane after a `{`; the shell treats every non-ASCII character as part of a word,
    as it treats a letter, so the copy has the same structure and byte offsets. The
    letter is one the text does not hold, so a heredoc delimiter cannot be confused.
    """
    if data.isascii():
        return data
    letter = next((c for c in _WORD_LETTERS if c not in text), "z")
    return "".join(c if c.isascii() else letter * len(c.encode()) for c in text).encode()


class _Source:
    """A script's original bytes, read through the syntax tree of its parsed copy."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def literal(self, node: Any) -> Word:
        """The value of a word node when it is fixed before run time, else None."""
        kind = node.type
        text = self.text(node)
        if kind == "word":
            if _GLOB.search(text) or _BRACES.search(text):
                return None
            return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)
        if kind == "raw_string":
            return text[1:-1]
        if kind == "number":
            return text
        if kind == "string":
            if any(c.type != "string_content" for c in node.named_children):
                return None
            return _IN_QUOTES.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text[1:-1])
        if kind == "concatenation":
            if _BRACES.search(text):
                return None
            parts = [self.literal(c) for c in node.children]
            return None if None in parts else "".join(p for p in parts if p is not None)
        return None

    def declared(self, node: Any) -> Word:
        """A word of `export`/`declare`/`local`/`unset`: `NAME=value` when its value is fixed."""
        if node.type == "variable_name":
            return self.text(node)
        if node.type != "variable_assignment":
            return self.literal(node)
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        fixed = "" if value is None else self.literal(value)
        return None if name is None or fixed is None else f"{self.text(name)}={fixed}"

    def text(self, node: Any) -> str:
        """The original text of `node` (the tree was parsed from a copy)."""
        raw = self.data[node.start_byte : node.end_byte]
        return raw.decode("utf-8", "replace")  # a cut inside a character: never an error

    def heredoc_text(self, node: Any) -> str | None:
        """The text a heredoc or here-string feeds, when it is fixed before run time."""
        if node.type == "herestring_redirect":
            words = [self.literal(c) for c in node.named_children]
            return words[0] if len(words) == 1 else None
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if body is None:
            return None
        text = self.text(body)
        expanded = any(c.type != "heredoc_content" for c in body.named_children)
        if self.quoted_heredoc(node):
            return text
        return None if expanded or runs_substitution(text) else text

    def quoted_heredoc(self, node: Any) -> bool:
        """Whether a heredoc's delimiter is quoted, so that its body is not expanded."""
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        return start is not None and self.text(start)[:1] in ("'", '"', "\\")

    def unparsed(self, body: Any) -> str:
        """A heredoc body's text with the parts the grammar read (`$(...)`, `$x`) blanked."""
        raw = bytearray(self.data[body.start_byte : body.end_byte])
        for child in body.named_children:
            if child.type != "heredoc_content":
                start, end = child.start_byte - body.start_byte, child.end_byte - body.start_byte
                raw[start:end] = b" " * (end - start)
        return raw.decode("utf-8", "replace")

    def writes(self, redirect: Any) -> bool:
        """Whether a redirection writes a file other than /dev/null."""
        if redirect.type == "heredoc_redirect":  # tree-sitter nests `<<E > out`'s `> out` here
            return any(self.writes(r) for r in redirect.children_by_field_name("redirect"))
        if redirect.type != "file_redirect":
            return False
        operator = next((c.type for c in redirect.children if not c.is_named), "")
        target = redirect.child_by_field_name("destination")
        value = self.literal(target) if target is not None else None
        if operator in _DUPS:
            return not (value is not None and (value.isdigit() or value == "-"))
        return operator in _WRITES and value != "/dev/null"


class Reader:
    """Walks a syntax tree, collecting the views of each simple command and what is unsure."""

    def __init__(self) -> None:
        self.commands: list[tuple[Command, ...]] = []
        self.unsure: list[str] = []
        self.sets: list[str] = []
        self.variables = Variables()

    def script(self) -> Script:
        unknown = self.variables.unknown()
        if unknown:
            names = ", ".join(unknown[:5])
            self.unsure.append(f"arithmetic reads variables not known to hold integers: {names}")
        return Script(
            tuple(self.commands), tuple(dict.fromkeys(self.unsure)), tuple(dict.fromkeys(self.sets))
        )

    def read_text(self, text: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.unsure.append(f"command text is nested more than {MAX_DEPTH} levels deep")
            return
        if "\x00" in text:
            self.unsure.append("the command holds a NUL character")
            return
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            self.unsure.append("the command is not valid text (a lone surrogate)")
            return
        if len(data) > MAX_LENGTH:
            self.unsure.append(f"the command is longer than {MAX_LENGTH} bytes, the most read")
            return
        try:
            root = _parse(_ascii_copy(text, data))
        except ImportError as exc:  # a core dependency; missing, nothing can be read
            self.unsure.append(f"the shell grammar is not installed ({exc})")
            return
        if root is None:
            self.unsure.append("reserved words before a compound command nest too deep")
            return
        if root.has_error:
            self.unsure.append("it does not parse as a shell command")
        if _COMMAND_TABLES.search(text):
            self.unsure.append("BASH_ALIASES and BASH_CMDS make a name run other text")
        if any(_in_code(root, at) for at in joins_word(data)):
            self.unsure.append("a backslash-newline joins two parts of a word (bash reads one)")
        self.walk(root, _Source(data), depth)

    def walk(self, root: Any, source: _Source, depth: int) -> None:
        if _COPROC.search(source.data):  # blanked before parsing (`_parse`), so looked for here
            self.sets.append("the variable a coproc is named by (COPROC when unnamed)")
        # A stack, not recursion: `$($($(...)))` may nest deeper than Python's recursion limit.
        stack: list[tuple[Any, bool]] = [(root, False)]
        stdin_of: dict[int, str] = {}  # node id -> the heredoc text its command reads
        words_of: dict[int, list[Any]] = {}  # node id -> words hung on a redirection after it
        while stack:
            node, writes = stack.pop()
            self._modelled(node, source)
            kind = node.type
            children = node.children
            if kind == "redirected_statement":
                writes, stdin = self._redirections(node, source, writes)
                receiver = _receiver(node.child_by_field_name("body"))
                if stdin is not None and receiver is not None:
                    stdin_of[receiver.id] = stdin
                self._hung_words(node, receiver, words_of)
            elif kind == "command":
                extra = words_of.get(node.id, [])
                self._command(node, source, writes, (stdin_of.get(node.id), extra), depth)
            elif kind in ("declaration_command", "unset_command"):
                self._declaration_command(node, source, writes)
            else:
                children = self._visit(node, source, depth)
            stack.extend((child, writes) for child in reversed(children))

    def _modelled(self, node: Any, source: _Source) -> None:
        """Call the script unsure of a node kind or token that is not on the modelled lists."""
        kind = node.type
        if _translated(node, source.data):
            self.unsure.append(f"translated_string: {UNMODELLED_NODES['translated_string']}")
        if node.is_named and kind not in MODELLED_NODES and kind != "ERROR":
            why = UNMODELLED_NODES.get(kind, "a form the reader does not model")
            self.unsure.append(f"{kind}: {why}")
        elif not node.is_named and kind not in MODELLED_TOKENS:
            why = UNMODELLED_TOKENS.get(kind, "a token the reader does not model")
            self.unsure.append(f"{kind!r}: {why}")

    def _hung_words(self, node: Any, receiver: Any, words_of: dict[int, list[Any]]) -> None:
        """Give the command a redirection follows the words the grammar hung on it.

        Bash takes every word of a simple command that is not part of a redirection as the
        command's, wherever it stands: `rm >/dev/null -rf DIR` runs `rm -rf DIR`. The
        grammar reads `-rf DIR` as more targets of `>`.
        """
        hung = [w for r in node.children_by_field_name("redirect") for w in _trailing(r)]
        if not hung:
            return
        if receiver is None:
            self.unsure.append("words after a redirection of a compound command")
        else:
            words_of.setdefault(receiver.id, []).extend(hung)

    def _declaration_command(self, node: Any, source: _Source, writes: bool) -> None:
        """`declare`/`typeset`/`local`/`export`/`readonly`/`unset` as the grammar reads them."""
        if _spans_lines(node, source.data):
            self.unsure.append("the grammar joined two lines into one command")
        words: list[Word] = [source.text(node.children[0])]
        words += [source.declared(c) for c in node.named_children]
        self.commands.append((Command(tuple(words), plain=not writes),))
        self.sets.append(f"what `{words[0]}` changes")
        self._declaration(node, source, words)

    def _visit(self, node: Any, source: _Source, depth: int) -> list[Any]:
        """Note what bash runs or evaluates in `node`; the children still to walk."""
        kind = node.type
        children: list[Any] = node.children
        if kind == "command_substitution" and _opens(node, "`"):
            in_string = node.parent is not None and node.parent.type == "string"
            self._substitutions(source.text(node), depth, in_string=in_string)
            return []  # read from its unescaped text: the grammar misreads nested backquotes
        if kind == "heredoc_redirect" and source.quoted_heredoc(node):
            return [c for c in children if c.type != "heredoc_body"]
        if kind in _REDIRECTS:
            self._redirect(node)
        if kind == "heredoc_body":
            self._substitutions(source.unparsed(node), depth)
        elif kind in _TEXT_LEAVES and not children:
            text = source.text(node)
            if kind == "word" and _BARE_NEWLINE.search(text):
                # The grammar glues a word that starts with a backslash (`\rm`) to the line
                # before it: bash runs it as a command of its own, which was not read.
                self.unsure.append("a word spans two lines, which bash reads as two commands")
            self._substitutions(text, depth)
        elif kind in _EVALUATED:
            self._evaluated(node, source, depth)
        return children

    def _redirect(self, node: Any) -> None:
        """Call the script unsure of a redirection that is not modelled.

        Modelled: the operators of `REDIRECTIONS` with a number or nothing before them. Not:
        `{name}>file`, which stores a new descriptor in a variable (`{a[$(...)]}>f` evaluates
        the subscript), and words after the target of a redirection bash takes for no command.
        """
        operator = next((c.type for c in node.children if not c.is_named), "")
        if operator not in REDIRECTIONS:
            self.unsure.append(f"the redirection {operator!r} is not modelled")
        before = node.prev_sibling
        while before is not None and before.end_byte == node.start_byte:
            if before.type in ("word", "concatenation") and _FD_NAME.fullmatch(before.text):
                self.unsure.append("a `{name}` redirection stores a descriptor in a variable")
                break
            before = before.children[-1] if before.children else None
        parent = node.parent.type if node.parent is not None else ""
        if _trailing(node) and parent not in _OWNS_REDIRECTS:
            self.unsure.append("words after a redirection that belongs to no simple command")

    def _evaluated(self, node: Any, source: _Source, depth: int) -> None:
        """Note what bash evaluates in `node`: arithmetic, expansions, special assignments."""
        kind = node.type
        if kind == "variable_assignment":
            self._assignment(node, source, depth)
        elif kind == "arithmetic_expansion" or (
            kind == "compound_statement" and _opens(node, "((")
        ):
            self.arithmetic(source.text(node))
        elif kind == "c_style_for_statement":
            self._c_style_for(node, source, depth)
        elif kind in ("for_statement", "select_statement"):
            looped = node.child_by_field_name("variable")
            self.sets.append(source.text(looped) if looped is not None else kind)
        elif kind == "subscript":
            self.arithmetic(_inside_brackets(source.text(node)))
        elif kind == "expansion":
            self._expansion(source.text(node))
        elif kind in ("binary_expression", "unary_expression"):
            self._test(node, source)
        elif kind == "array":
            self._keys(node, source)

    def _c_style_for(self, node: Any, source: _Source, depth: int) -> None:
        """`for ((A; B; C))`: A, B and C are arithmetic."""
        for part in node.named_children:
            if part.type == "variable_assignment":
                self._assignment(part, source, depth)
            elif part.type not in ("do_group", "compound_statement"):
                self.arithmetic(source.text(part))

    def _keys(self, array: Any, source: _Source) -> None:
        """`a=([SUB]=v)`: bash evaluates SUB as arithmetic (after quote removal, so that
        `[\\$(...)]` runs too); the grammar reads it as plain words."""
        for element in array.named_children:
            keyed = _KEYED.match(source.text(element))
            if keyed is not None:
                self.arithmetic(keyed.group(1))

    def arithmetic(self, text: Word) -> None:
        """Note arithmetic `text` that bash evaluates; None is text known only at run time."""
        why = "arithmetic text is not known until run time" if text is None else None
        if text is not None and _ARITHMETIC_SETS.search(text):
            self.sets.append(f"a variable of `{text[:60]}`")
        why = why or self.variables.evaluate(text or "")
        if why is not None:
            self.unsure.append(why)

    def variable_name(self, word: Word, where: Sequence[Word]) -> None:
        """Note a word a builtin assigns to as a variable name (`read NAME`, `printf -v NAME`)."""
        if word is None:
            self.unsure.append(f"a variable name is not known until run time: {_show(where)}")
            return
        self.variables.assign(word.split("[", 1)[0], integer=False)
        self.sets.append(word.split("[", 1)[0])
        self.special(word, None, 0, exported=False)
        self.subscript(word)

    def subscript(self, word: str) -> None:
        """Note the subscript of a name a builtin is given as text (`read 'a[SUB]'`).

        Bash finds the closing `]` by its own quoting rules and evaluates the subscript as
        arithmetic, `$( )` and all: only a subscript of names, numbers and arithmetic
        operators is modelled.
        """
        name = word.split("=", 1)[0]
        if "[" not in name:
            return
        plain = _SUBSCRIPTED.fullmatch(word)
        if plain is None:
            self.unsure.append(f"a subscript that is not plain arithmetic: {word[:120]}")
        else:
            self.arithmetic(plain.group(1))

    def _assignment(self, node: Any, source: _Source, depth: int) -> None:
        target = node.child_by_field_name("name")
        if target is None:
            return
        written = source.text(target)
        name = written.split("[", 1)[0]
        value = node.child_by_field_name("value")
        literal = "" if value is None else source.literal(value)
        integer = literal is not None and (literal == "" or is_integer(literal))
        if name in self.variables.integer_typed or name in INTEGER_SPECIALS:
            self.arithmetic("" if value is None else source.text(value))
            integer = True
        elif value is not None and value.type == "arithmetic_expansion":
            integer = True
        self.variables.assign(name, integer=integer)
        self.sets.append(name)
        exported = node.parent is not None and node.parent.type == "declaration_command"
        self.special(written, literal, depth, exported=exported)

    def special(self, name: str, value: Word, depth: int, *, exported: bool) -> None:
        """Read the value of a variable bash runs or expands later, or call it unsure."""
        if name == "PROMPT_COMMAND" or name.startswith("PROMPT_COMMAND["):
            self.nested(value, depth, [name])
        elif name in ("PS0", "PS1", "PS2", "PS4"):
            if value is None:
                self.unsure.append(
                    f"{name} (expanded when bash prompts) is not known until run time"
                )
            elif "$((" in value:
                # Arithmetic in a prompt is evaluated each time bash prompts, subscripts and the
                # values of the names it reads included: not modelled here.
                self.unsure.append(f"{name} holds arithmetic bash evaluates when it prompts")
            else:
                self._substitutions(value, depth)
        elif name.startswith("BASH_FUNC_"):
            self.unsure.append(f"{name} makes a shell run code from it (or the file it names)")
        else:
            base = name.split("[", 1)[0]
            ours = base in BASH_VARIABLES or base.startswith("BASH_")
            if ours and base not in MODELLED_VARIABLES:
                self.unsure.append(f"{base} is one of bash's own variables, not modelled")

    def _expansion(self, text: str) -> None:
        if text.startswith("${!") and not _LISTS_NAMES.search(text):
            self.unsure.append(f"an indirect expansion evaluates a name known at run time: {text}")
        elif text.endswith("@P}"):
            self.unsure.append(f"a prompt expansion runs the command text in a value: {text}")
        else:
            defaulted = _DEFAULT_ASSIGNS.match(text)
            if defaulted is not None:
                self.sets.append(defaulted.group(1))
            substring = _SUBSTRING.fullmatch(text)
            if substring is not None:
                self.arithmetic(substring.group(1))

    def _test(self, node: Any, source: _Source) -> None:
        """`[[ A -eq B ]]` evaluates A and B as arithmetic; `[[ -v a[I] ]]` evaluates I."""
        operator = next((c for c in node.children if c.type == "test_operator"), None)
        if operator is None:
            return
        test = source.text(operator)
        operands = [source.text(c) for c in node.named_children if c.type != "test_operator"]
        if test in _ARITHMETIC_TESTS:
            for operand in operands:
                self.arithmetic(operand)
        elif test == "-v":
            for part in node.named_children:
                if part.type != "test_operator":
                    written = source.text(part)
                    plain = written if _PLAIN_NAME.fullmatch(written) else None
                    self.variable_name(source.literal(part) or plain, [test, written])

    def _declaration(self, node: Any, source: _Source, words: list[Word]) -> None:
        """`declare -i` makes later assignments arithmetic; what else declare evaluates.

        An operand the grammar did not read as an assignment (`declare "a[$i]=1"`) is read
        by `declared`, as the builtin's own words are; `unset` evaluates a subscript too.
        """
        if node.type == "unset_command":
            if words[0] == "unset":
                _unset(self, words, None, 0)
            return
        options = "".join(w[1:] for w in words[1:] if w is not None and w[:1] in ("-", "+"))
        _declaration_options(self, words, options)
        evaluates = words[0] in _ARRAY_DECLARATIONS
        for part in node.named_children:
            if part.type == "variable_assignment":
                self._declared_assignment(part, source, options, evaluates=evaluates)
                continue
            word = source.declared(part)
            if word is None or word[:1] not in ("-", "+"):
                self.declared(word, words, evaluates=evaluates)
            if word is not None and "i" in options:
                self.variables.integer_typed.add(word.split("[", 1)[0].split("=", 1)[0])

    def _declared_assignment(
        self, part: Any, source: _Source, options: str, *, evaluates: bool
    ) -> None:
        """`declare NAME=VALUE`: VALUE is arithmetic under `-i`, and may be an array assignment."""
        target = part.child_by_field_name("name")
        value = part.child_by_field_name("value")
        name = "" if target is None else source.text(target).split("[", 1)[0]
        if "i" in options:
            self.variables.integer_typed.add(name)
            if value is not None:
                self.arithmetic(source.text(value))
        if value is None or value.type == "array" or not evaluates:
            return
        fixed = source.literal(value)
        if fixed is None and _fresh_local(part, source, name, options):
            return
        if fixed is None or fixed.startswith("("):
            # bash assigns `(...)` to a name that is an array as a compound assignment
            # (`declare a="$y"` with y='([0]=$(rm ...))' runs rm); whether the name is an
            # array may be decided outside the script.
            self.unsure.append(
                f"{source.text(part)[:120]}: declare may read the value as an array assignment"
            )

    def declared(self, word: Word, where: Sequence[Word], *, evaluates: bool) -> None:
        """Note an operand of `declare`/`local`/`export`...: `NAME`, `NAME[SUB]`, `NAME=VALUE`.

        A subscript is arithmetic; a value starting with `(` may be an array assignment, whose
        subscripts are arithmetic too.
        """
        if word is None:
            self.unsure.append(f"an operand is not known until run time: {_show(where)}")
            return
        self.subscript(word)
        name, equals, value = word.partition("=")
        if evaluates and value.startswith("("):
            self.unsure.append(f"declare may read the value as an array assignment: {word[:120]}")
        if equals:
            self.special(name, value, 0, exported=True)

    def _substitutions(self, text: str, depth: int, *, in_string: bool = False) -> None:
        """Read the backquoted command text in `text`; unsure of a `$(` the grammar left."""
        if "`" in text:
            found = backquoted(text, in_string=in_string)
            if found is None:
                self.unsure.append(f"a backquote is not closed: {text[:120]}")
            for inner in found or ():
                self.read_text(inner, depth + 1)
        if runs_substitution(text.replace("`", "")):
            self.unsure.append(f"a command substitution the grammar did not read: {text[:120]}")

    def _redirections(
        self, node: Any, source: _Source, writes: bool, stdin: str | None = None
    ) -> tuple[bool, str | None]:
        for redirect in node.children_by_field_name("redirect"):
            writes = writes or source.writes(redirect)
            if redirect.type in ("heredoc_redirect", "herestring_redirect"):
                stdin = source.heredoc_text(redirect)
        return writes, stdin

    def _command(
        self,
        node: Any,
        source: _Source,
        writes: bool,
        given: tuple[str | None, list[Any]],
        depth: int,
    ) -> None:
        stdin, hung = given
        name = node.child_by_field_name("name")
        if name is None:
            return
        writes, stdin = self._redirections(node, source, writes, stdin)
        if _spans_lines(node, source.data):
            self.unsure.append("the grammar joined two lines into one command")
        assigned = any(c.type == "variable_assignment" for c in node.children)
        arguments = list(node.children_by_field_name("argument")) + hung
        arguments += [w for r in node.children_by_field_name("redirect") for w in _trailing(r)]
        arguments.sort(key=lambda n: n.start_byte)
        words = [source.literal(name.named_children[0]) if name.named_children else None]
        words += [source.literal(a) for a in arguments]
        self.simple(words, plain=not (writes or assigned), stdin=stdin, depth=depth)

    def simple(self, words: list[Word], *, plain: bool, stdin: str | None, depth: int) -> None:
        """Record one simple command: its views, and any command text it runs."""
        views: list[Command] = []
        current: list[Word] | None = words
        while current:
            name = current[0]
            if name is None:
                self.unsure.append(f"a command name is not known until run time: {_show(current)}")
                break
            views.append(Command(tuple(current), plain))
            self._runs(current, stdin, depth)
            base = _base(name)
            unwrap = WRAPPERS.get(base)
            if unwrap is None:
                break
            written, current = current, self.unwrapped(unwrap, current)
            plain = plain and base in PLAIN and not (current and unwrap.writes(written))
            passed = written[1 : len(written) - len(current or ())]
            if (base == "env" and passed) or any(w is None or _ASSIGNS.match(w) for w in passed):
                self.sets.append(f"what `{base}` passes to the command it runs")
        if views:
            self.commands.append(tuple(views))
            self._special_words(words, depth)

    def _runs(self, words: list[Word], stdin: str | None, depth: int) -> None:
        """Read what the command `words` runs or evaluates besides itself, by its name.

        A name without a `/` that is a bash builtin runs the builtin: it is read by its
        entry in `BUILTINS`, or the script is unsure when it has none.
        """
        name = words[0] or ""
        if "/" not in name and name in BASH_BUILTINS and not _inert(words):
            self.sets.append(f"what `{name}` changes")
        if "/" not in name and name in BASH_BUILTINS:
            handler = BUILTINS.get(name)
            if handler is None:
                why = UNMODELLED_BUILTINS.get(name, "a builtin the reader does not model")
                self.unsure.append(f"the builtin {name} is not modelled: {why}")
            else:
                handler(self, words, stdin, depth)
            return
        program = _PROGRAMS.get(_base(name))
        if program is not None:
            program(self, words, stdin, depth)

    def _special_words(self, words: list[Word], depth: int) -> None:
        """`env PS4=... bash`, `sudo BASH_ENV=... sh`: assignments a wrapper passes on."""
        for word in words[1:]:
            if word is not None and "=" in word and word[:1].isupper():
                name, value = word.split("=", 1)
                shell = any(w is not None and _base(w) in _SHELLS for w in words)
                self.special(name, value, depth, exported=shell)

    def unwrapped(self, unwrap: Wrapper, words: list[Word]) -> list[Word] | None:
        try:
            return unwrap.inner(words)
        except UnreadableError as exc:
            self.unsure.append(f"{_show(words)}: {exc}")
            return None

    def nested(self, text: Word, depth: int, where: list[Word]) -> None:
        if text is None:
            self.unsure.append(f"command text is not known until run time: {_show(where)}")
        else:
            self.read_text(text, depth + 1)

    def find(self, words: list[Word], depth: int) -> None:
        """Record the commands `find -exec CMD ;` (and -execdir, -ok, -okdir) runs."""
        inner: list[Word] | None = None
        for word in words[1:]:
            if inner is None:
                inner = [] if word in ("-exec", "-execdir", "-ok", "-okdir") else None
            elif word in (";", "+"):
                self.simple(inner, plain=False, stdin=None, depth=depth)
                inner = None
            else:
                inner.append(None if word is None or "{}" in word else word)
        if inner:
            self.simple(inner, plain=False, stdin=None, depth=depth)


def _opens(node: Any, token: str) -> bool:
    return bool(node.children) and node.children[0].type == token


def _inside_brackets(text: str) -> str:
    """The subscript of `name[subscript]`, which bash evaluates as arithmetic."""
    start = text.find("[")
    end = text.rfind("]")
    return text[start + 1 : end] if 0 <= start < end else ""


def _receiver(body: Any) -> Any:
    """The command a redirection of `body` feeds: tree-sitter hangs `a && b <<EOF` on the list."""
    while (
        body is not None
        and body.type in ("list", "pipeline", "negated_command")
        and body.named_children
    ):
        body = body.named_children[-1]
    return body if body is not None and body.type == "command" else None


def _fresh_local(part: Any, source: _Source, name: str, options: str) -> bool:
    """Whether `local NAME=VALUE` (or `declare` in a function, without `-g`, `-a`, `-A`) makes
    a new scalar.

    In a function, the declaration makes a variable of the function's own, which is an
    array only when the function made it one before (in a loop, a later `NAME=(...)` runs
    first); a name the function body writes nowhere else, as a word that is not an expansion
    (`$NAME`, `${NAME...}`), is a new scalar, whose value bash never reads as an array.
    """
    function = part.parent
    while function is not None and function.type != "function_definition":
        function = function.parent
    if function is None or not name or set(options) & {"g", "a", "A"}:
        return False  # global, or declared an array here
    body = source.text(function)
    written = re.findall(rf"(?<![\w${{#!]){re.escape(name)}(?!\w)", body)
    return len(written) == 1


def _spans_lines(command: Any, data: bytes) -> bool:
    """Whether a newline no backslash escapes stands between two parts of `command`.

    Bash ends a simple command at such a newline; tree-sitter-bash sometimes reads on
    (`a |& b` then `set -e` NEWLINE `rm -rf DIR` is one command `set -e rm -rf DIR`).
    """
    parts = command.children
    for before, after in pairwise(parts):
        gap = data[before.end_byte : after.start_byte]
        if b"\n" in gap.replace(b"\\\n", b""):
            return True
    return False


def _translated(node: Any, data: bytes) -> bool:
    """Whether `node` is the `$` of `$"..."`, which the grammar reads in a word as `$` and a
    string (and as a translated_string only in an assignment)."""
    return (
        node.type == "$"
        and data[node.end_byte : node.end_byte + 1] == b'"'
        and (node.parent is None or node.parent.type != "string")
    )


def _trailing(redirect: Any) -> list[Any]:
    """The words after a redirection's target, which the grammar hangs on the redirection."""
    if redirect.type == "file_redirect":
        targets = list(redirect.children_by_field_name("destination"))
        operator = next((c.type for c in redirect.children if not c.is_named), "")
        return targets if operator in _CLOSES else targets[1:]  # `>&-` takes no target
    if redirect.type != "heredoc_redirect":
        return []
    found = list(redirect.children_by_field_name("argument"))
    for inner in redirect.children_by_field_name("redirect"):
        found += _trailing(inner)
    return found


def _show(words: Sequence[Word]) -> str:
    return str(Command(tuple(words), plain=False))[:120]


# --- commands that run command text ------------------------------------------------------------

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "fish"})
_STDIN = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


def _shell(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`bash -c TEXT` runs TEXT; `bash` with no script runs what it reads from its input."""
    command_mode = stdin_mode = False
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            reader.unsure.append(f"a shell argument is not known until run time: {_show(words)}")
            return
        if word in ("--", "-"):
            index += 1
            break
        if word in ("--rcfile", "--init-file"):
            index += 2
            continue
        if len(word) < 2 or word[0] not in "-+":
            break
        letters = "" if word.startswith("--") else word[1:]
        command_mode = command_mode or "c" in letters
        stdin_mode = stdin_mode or "s" in letters
        index += 1 + sum(letter in "oO" for letter in letters)
    rest = words[index:]
    if rest and rest[0] in _STDIN:
        stdin_mode, rest = True, rest[1:]
    if command_mode:
        reader.nested(rest[0] if rest else None, depth, words)
    elif rest and not stdin_mode:
        return  # a script file: a command of its own, not read here
    elif stdin is not None:
        reader.read_text(stdin, depth + 1)
    else:
        reader.unsure.append(f"a shell reads commands from its input: {_show(words)}")


def _eval(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`eval [--] ARG...` runs its arguments joined by spaces; `eval -x` is an error."""
    args = words[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    elif args and args[0] is not None and len(args[0]) > 1 and args[0].startswith("-"):
        return  # bash: "invalid option", nothing runs
    text = None if None in args else " ".join(w for w in args if w is not None)
    reader.nested(text, depth, words)


def _trap(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`trap [-lp] [--] ACTION SIGNAL...` sets ACTION, command text run later."""
    rest = words[1:]
    first = rest[0] if rest else None
    if first == "--":
        rest = rest[1:]
    elif first is not None and len(first) > 1 and first.startswith("-"):
        return  # -l and -p print; any other option is an error: nothing is set
    if len(rest) < 2 or rest[0] in ("", "-"):
        return  # one word is a signal to reset; "" ignores the signals, "-" resets them
    reader.nested(rest[0], depth, words)


def _su(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`su [options] [-] [USER [ARG...]]` runs a shell, given `-c` text or reading its input."""
    shell = reader.unwrapped(SU, words)
    if shell:
        _shell(reader, shell, stdin, depth)


def _source(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`source FILE` runs a file, a command of its own; `source <(...)` runs unknown text."""
    if len(words) < 2 or words[1] is None:
        reader.unsure.append(f"the file it runs is not known until run time: {_show(words)}")
    elif words[1] in _STDIN and stdin is not None:
        reader.read_text(stdin, depth + 1)
    elif words[1] in _STDIN or words[1].startswith(("/dev/fd/", "/proc/")):
        reader.unsure.append(f"it runs commands from its input: {_show(words)}")


def _alias(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`alias NAME=TEXT` is not modelled: bash may put TEXT in place of any later NAME.

    `alias` alone and `alias NAME` print.
    """
    for word in words[1:]:
        if word is None or "=" in word:
            reader.unsure.append(f"an alias definition is not modelled: {_show(words)}")


def _watch(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`watch [options] COMMAND...` runs its words, joined, through `sh -c`."""
    inner = reader.unwrapped(WATCH, words)
    if inner:
        text = None if None in inner else " ".join(w for w in inner if w is not None)
        reader.nested(text, depth, words)


def _find(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    reader.find(words, depth)


Handler = Callable[[Reader, list[Word], str | None, int], None]
"""Reads what a command runs or evaluates besides itself: (reader, words, stdin, depth)."""

_PROGRAMS: dict[str, Handler] = {
    **dict.fromkeys(_SHELLS, _shell),
    "su": _su,
    "watch": _watch,
    "find": _find,
}
"""Programs (not builtins) whose arguments or input hold command text, read as a script."""


# --- builtins that evaluate their arguments ----------------------------------------------------


def _let(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`let EXPR...` evaluates each argument as arithmetic."""
    for word in words[1:]:
        reader.arithmetic(word)


def _after(option: str, words: list[Word]) -> list[Word]:
    """The values of `option` in `words` (`-v NAME` or `-vNAME`)."""
    found: list[Word] = []
    for index, word in enumerate(words[1:], start=1):
        if word == option and index + 1 < len(words):
            found.append(words[index + 1])
        elif word is not None and word.startswith(option) and len(word) > len(option):
            found.append(word[len(option) :])
    return found


def _printf(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    for name in _after("-v", words):
        reader.variable_name(name, words)


def _test_v(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    for index, word in enumerate(words[:-1]):
        if word == "-v":
            reader.variable_name(words[index + 1], words)


def _wait(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    for name in _after("-p", words):
        reader.variable_name(name, words)


def _getopts(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    if len(words) > 2:
        reader.variable_name(words[2], words)


def _operands(words: list[Word], valued: str) -> list[Word] | None:
    """The operands after a builtin's options; None when an option is not known."""
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            return None
        if word == "--":
            return words[index + 1 :]
        if not word.startswith("-") or word == "-":
            break
        takes = next((i for i, c in enumerate(word[1:], start=1) if c in valued), None)
        index += 2 if takes == len(word) - 1 else 1
    return words[index:]


def _read(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`read NAME...` (and `-a NAME`) assigns; a subscript in a name is arithmetic."""
    operands = _operands(words, "adinNptu")
    if operands is None:
        reader.unsure.append(f"an option is not known until run time: {_show(words)}")
        return
    for name in [*operands, *_after("-a", words)]:
        reader.variable_name(name, words)


def _mapfile(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`mapfile -C CALLBACK` evaluates CALLBACK as command text, two words appended."""
    for callback in _after("-C", words):
        # bash evaluates `CALLBACK INDEX LINE` as one text: the two words (known only at run
        # time) go to the callback's last command, as bash appends them.
        reader.nested(
            callback if callback is None else f'{callback} "$index" "$line"', depth, words
        )
    operands = _operands(words, "dnOsuCc")
    if operands is None:
        reader.unsure.append(f"an option is not known until run time: {_show(words)}")
    for name in operands or ():
        reader.variable_name(name, words)


def _data(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """The builtin's arguments are data: it runs and evaluates none of them."""


_ARRAY_DECLARATIONS = frozenset({"declare", "typeset", "local"})
"""Declaration builtins that read a value given to an array name as a compound assignment."""


def _declare(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`declare`, `local`, `export`... reached through a wrapper (`command declare ...`)."""
    options = ""
    for word in words[1:]:
        if word is not None and len(word) > 1 and word[0] in "-+":
            options += word[1:]
        else:
            reader.declared(word, words, evaluates=words[0] in _ARRAY_DECLARATIONS)
    _declaration_options(reader, words, options)
    if "i" in options:
        reader.unsure.append(f"an integer declaration through a wrapper: {_show(words)}")


_DECLARATION_OPTIONS = frozenset("-aAfFgilprtux")
"""The options of `declare` and its kin the reader models; not `-n` (a name reference) nor
`-I` (a local inherits the attributes, `-n` and `-i` among them, of the name it shadows)."""


def _declaration_options(reader: Reader, words: list[Word], options: str) -> None:
    """Only the options of `_DECLARATION_OPTIONS` are modelled: any other makes it unsure."""
    if "n" in options:
        reader.unsure.append(f"a name reference is not modelled: {_show(words)}")
    elif not set(options) <= _DECLARATION_OPTIONS:
        reader.unsure.append(f"an option of {words[0]} is not modelled: {_show(words)}")


def _unset(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`unset NAME[SUB]` evaluates SUB as arithmetic."""
    for word in words[1:]:
        if word is None:
            reader.unsure.append(f"an operand is not known until run time: {_show(words)}")
        else:
            reader.subscript(word)


def _set(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`set` with the options of `SET_FLAGS` and `SET_OPTIONS`; other words are parameters."""
    index = 1
    while index < len(words):
        word = words[index]
        if word is None:
            reader.unsure.append(f"an option is not known until run time: {_show(words)}")
            return
        if word in ("--", "-") or len(word) < 2 or word[0] not in "-+":
            return  # the positional parameters follow: data
        letters = word[1:]
        index += 1
        if "o" in letters and index < len(words):
            name = words[index]
            index += 1
            if name not in SET_OPTIONS:
                reader.unsure.append(f"the shell option {name} is not modelled: {_show(words)}")
        if not set(letters) <= SET_FLAGS | {"o"}:
            reader.unsure.append(f"a shell option is not modelled: {_show(words)}")


def _shopt(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
    """`shopt -s/-u NAME...` with the names of `SHOPT_OPTIONS`; without `-s`/`-u` it prints."""
    options = "".join(w[1:] for w in words[1:] if w is not None and w.startswith("-"))
    names = [w for w in words[1:] if w is None or not w.startswith("-")]
    known = SET_OPTIONS if "o" in options else SHOPT_OPTIONS
    if None in words or not set(options) <= set("supqo"):
        reader.unsure.append(f"a shopt option is not known: {_show(words)}")
    elif ("s" in options or "u" in options) and not set(names) <= known:
        reader.unsure.append(f"a shell option is not modelled: {_show(words)}")


def _only_options(allowed: str) -> Handler:
    """A builtin whose options in `allowed` only print or look up: any other makes it unsure."""

    def handler(reader: Reader, words: list[Word], stdin: str | None, depth: int) -> None:
        for word in words[1:]:
            if word is None or (
                len(word) > 1 and word[0] == "-" and not set(word[1:]) <= set(allowed)
            ):
                reader.unsure.append(f"an option of {words[0]} is not modelled: {_show(words)}")
                return

    return handler


def _inert(words: list[Word]) -> bool:
    """Whether the builtin `words` leaves what later commands see as it was (`_INERT_BUILTINS`,
    or `set` with only the options of `_INERT_SET_FLAGS` and `_INERT_SET_NAMES`)."""
    if words[0] in _INERT_BUILTINS:
        return True
    if words[0] != "set":
        return False
    given = iter(words[1:])
    for word in given:
        if word is not None and _INERT_SET_FLAGS.fullmatch(word[:-1] or "-") and word[-1] == "o":
            word = next(given, None)  # `-o NAME`, or a cluster ending in it (`-euo pipefail`)
            if word not in _INERT_SET_NAMES:
                return False
        elif word is None or len(word) < 2 or not _INERT_SET_FLAGS.fullmatch(word):
            return False
    return True


BUILTINS: dict[str, Handler] = {
    # builtins that run command text
    "eval": _eval,
    "trap": _trap,
    "source": _source,
    ".": _source,
    # builtins that evaluate an argument as arithmetic, a variable name or command text
    "let": _let,
    "printf": _printf,
    "test": _test_v,
    "[": _test_v,
    "wait": _wait,
    "getopts": _getopts,
    "read": _read,
    "mapfile": _mapfile,
    "readarray": _mapfile,
    "declare": _declare,
    "typeset": _declare,
    "local": _declare,
    "export": _declare,
    "readonly": _declare,
    "unset": _unset,
    # builtins that change how later commands are read, in the ways modelled
    "alias": _alias,
    "set": _set,
    "shopt": _shopt,
    # only these options are modelled: `hash -p` makes a name run another program, `jobs -x`
    # runs a command, and an option not listed may do either
    "hash": _only_options("dlrt"),
    "jobs": _only_options("lnprs"),
    # wrappers: the command they run is a view of its own (`WRAPPERS`)
    **dict.fromkeys(["command", "builtin", "exec"], _data),
    # builtins whose arguments are data
    **dict.fromkeys(sorted(DATA_BUILTINS), _data),
}
"""The bash builtins the reader models, each with what it reads in the builtin's words.
Every other builtin (`UNMODELLED_BUILTINS`) makes the script unsure."""
