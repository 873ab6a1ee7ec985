"""What the shell reader models: every other form makes a script unsure (see `shell`).

The reader answers "read with confidence" only when every node of the syntax tree, every
bash builtin, every redirection operator and every expansion in the script is one listed
here as modelled. The lists are closed: a grammar node kind or a bash builtin that is on
neither the modelled nor the unmodelled list fails the tests (`tests/shell/test_closed.py`),
so a new kind cannot slip through unclassified, and `docs/shell-rules.md` lists them.
"""

from __future__ import annotations

__all__ = [
    "BASH_BUILTINS",
    "DATA_BUILTINS",
    "MODELLED_NODES",
    "MODELLED_TOKENS",
    "REDIRECTIONS",
    "SET_FLAGS",
    "SET_OPTIONS",
    "SHOPT_OPTIONS",
    "UNMODELLED_BUILTINS",
    "UNMODELLED_NODES",
    "UNMODELLED_TOKENS",
]


def _words(text: str) -> list[str]:
    """The words of `text` split at spaces: a table written as a line."""
    return text.split()


MODELLED_NODES = frozenset(
    {
        # the structure: lists, pipelines and compound commands, whose parts are read
        "program",
        "list",
        "pipeline",
        "negated_command",
        "subshell",
        "compound_statement",
        "if_statement",
        "elif_clause",
        "else_clause",
        "for_statement",
        "c_style_for_statement",
        "while_statement",
        "do_group",
        "case_statement",
        "case_item",
        "function_definition",
        "redirected_statement",
        "comment",
        # simple commands and their words
        "command",
        "command_name",
        "declaration_command",
        "unset_command",
        "variable_assignment",
        "variable_assignments",
        "variable_name",
        "word",
        "number",
        "concatenation",
        "string",
        "string_content",
        "raw_string",
        "ansi_c_string",
        "brace_expression",
        "array",
        "special_variable_name",
        "extglob_pattern",
        "regex",
        # expansions: a word holding one is known only at run time
        "simple_expansion",
        "expansion",
        "subscript",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        # redirections
        "file_redirect",
        "file_descriptor",
        "heredoc_redirect",
        "heredoc_start",
        "heredoc_body",
        "heredoc_content",
        "heredoc_end",
        "herestring_redirect",
        # tests and arithmetic, evaluated as the reader's arithmetic rules say
        "test_command",
        "test_operator",
        "binary_expression",
        "unary_expression",
        "postfix_expression",
        "ternary_expression",
        "parenthesized_expression",
    }
)
"""Named node kinds of tree-sitter-bash the reader models."""

UNMODELLED_NODES: dict[str, str] = {
    "translated_string": '`$"..."` is translated through a message catalog bash reads at '
    "run time, and the translation is expanded again",
}
"""Named node kinds the reader does not model, and why: a script holding one is unsure."""

MODELLED_TOKENS = frozenset(
    [
        # keywords
        *_words("case do done elif else esac fi for function if in select then until while"),
        *_words("declare export local readonly typeset unset unsetenv"),
        # operators between commands, and the openers of substitutions and expansions
        *_words("; & && || | |& ;; ;& ;;& ( ) { } [[ ]] (( )) ! ` $( <( >( ${ $(( $[ $"),
        # redirections
        *_words("< > >> &> &>> <& >& >&- <&- >| << <<- <<<"),
        # quotes, assignments, and the operators of tests, arithmetic and `${ }` expansions
        *_words('" = += == != =~ <= >= ~ [ ] , ? : @ # ## % %% / // /# /% ^ ^^ ,,'),
        *_words(":+ :- := :? - + * ** ++ -- %= &= *= **= -= /= <<= >>= ^= |="),
        *_words("-a -o .. A E K L Q U a k u"),
    ]
)
"""Anonymous tokens (keywords and operators) of tree-sitter-bash the reader models."""

UNMODELLED_TOKENS: dict[str, str] = {
    "P": "`${x@P}` expands a value as a prompt, running the command text in it",
    "$`": "the grammar's reading of `$` before a backquote, which bash does not share",
    "``": "an empty backquote pair, read by the grammar as an error",
}
"""Anonymous tokens the reader does not model, and why: a script holding one is unsure."""

REDIRECTIONS = frozenset(
    {"<", ">", ">>", "&>", "&>>", "<&", ">&", ">&-", "<&-", ">|", "<<", "<<-", "<<<"}
)
"""Redirection operators the reader models (`<<<` too, as a here-string); words written after
a redirection's target are the command's words, as bash reads them. `<>` and `{name}>` are not
modelled."""

BASH_BUILTINS = frozenset(
    _words(
        ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue "
        "declare dirs disown echo enable eval exec exit export false fc fg getopts hash help "
        "history jobs kill let local logout mapfile popd printf pushd pwd read readarray "
        "readonly return set shift shopt source suspend test times trap true type typeset "
        "ulimit umask unalias unset wait"
    )
)
"""The builtins of bash 5.2 (`bash -c 'compgen -b'`): a command named so runs the builtin."""

DATA_BUILTINS = frozenset(
    _words(
        ": true false echo pwd cd pushd popd dirs break continue exit return logout shift "
        "times umask ulimit bg fg disown suspend kill type help caller unalias"
    )
)
"""Builtins whose arguments are data: they run and evaluate none of them."""

UNMODELLED_BUILTINS: dict[str, str] = {
    "bind": "binds command text to keys, run later by readline",
    "compgen": "`-C`, `-F` and `-W` run or expand text the reader never reads",
    "complete": "defines completions that run command text later",
    "compopt": "changes completions that run command text later",
    "enable": "loads builtins from files (`-f`) or hides builtins behind programs (`-n`)",
    "fc": "re-runs and edits commands from the history, even in a non-interactive shell",
    "history": "writes the history that `fc` and `!` expansion run",
}
"""Builtins the reader does not model, and why: a script running one is unsure."""

SET_FLAGS = frozenset("abBCeEfhmnpPtTuvx")
"""The letters of `set -X`/`+X` the reader models; `-H` (history expansion) and `-k` (every
`NAME=value` word goes to the environment) are not."""

SET_OPTIONS = frozenset(
    {
        "allexport",
        "braceexpand",
        "emacs",
        "errexit",
        "errtrace",
        "functrace",
        "hashall",
        "ignoreeof",
        "monitor",
        "noclobber",
        "noexec",
        "noglob",
        "nolog",
        "notify",
        "nounset",
        "onecmd",
        "physical",
        "pipefail",
        "privileged",
        "verbose",
        "vi",
        "xtrace",
    }
)
"""The names of `set -o NAME` the reader models (not `history`, `histexpand`, `keyword`,
`posix`, `interactive-comments`)."""

SHOPT_OPTIONS = frozenset(
    {
        "autocd",
        "cdable_vars",
        "cdspell",
        "checkhash",
        "checkjobs",
        "checkwinsize",
        "cmdhist",
        "direxpand",
        "dirspell",
        "dotglob",
        "execfail",
        "extglob",
        "extquote",
        "failglob",
        "force_fignore",
        "globasciiranges",
        "globstar",
        "gnu_errfmt",
        "histappend",
        "histreedit",
        "histverify",
        "hostcomplete",
        "huponexit",
        "inherit_errexit",
        "lastpipe",
        "lithist",
        "localvar_unset",
        "mailwarn",
        "no_empty_cmd_completion",
        "nocaseglob",
        "nocasematch",
        "noexpand_translation",
        "nullglob",
        "patsub_replacement",
        "progcomp",
        "progcomp_alias",
        "promptvars",
        "shift_verbose",
        "sourcepath",
        "xpg_echo",
    }
)
"""The names of `shopt -s/-u NAME` the reader models. Not: `expand_aliases` (aliases are not
modelled), `localvar_inherit` (a local name inherits an array, whose assignment `local`
then evaluates), `extdebug`, `interactive_comments`, the `compat*` levels,
`assoc_expand_once`, `array_expand_once`."""

BASH_VARIABLES = frozenset(
    {
        "BASH",
        "BASHOPTS",
        "BASHPID",
        "BASH_ALIASES",
        "BASH_ARGC",
        "BASH_ARGV",
        "BASH_ARGV0",
        "BASH_CMDS",
        "BASH_COMMAND",
        "BASH_COMPAT",
        "BASH_ENV",
        "BASH_EXECUTION_STRING",
        "BASH_LINENO",
        "BASH_LOADABLES_PATH",
        "BASH_MONOSECONDS",
        "BASH_REMATCH",
        "BASH_SOURCE",
        "BASH_SUBSHELL",
        "BASH_TRAPSIG",
        "BASH_VERSINFO",
        "BASH_VERSION",
        "BASH_XTRACEFD",
        "CDPATH",
        "CHILD_MAX",
        "COLUMNS",
        "COMPREPLY",
        "COMP_CWORD",
        "COMP_KEY",
        "COMP_LINE",
        "COMP_POINT",
        "COMP_TYPE",
        "COMP_WORDBREAKS",
        "COMP_WORDS",
        "COPROC",
        "DIRSTACK",
        "EMACS",
        "ENV",
        "EPOCHREALTIME",
        "EPOCHSECONDS",
        "EUID",
        "EXECIGNORE",
        "FCEDIT",
        "FIGNORE",
        "FUNCNAME",
        "FUNCNEST",
        "GLOBIGNORE",
        "GLOBSORT",
        "GROUPS",
        "HISTCMD",
        "HISTCONTROL",
        "HISTFILE",
        "HISTFILESIZE",
        "HISTIGNORE",
        "HISTSIZE",
        "HISTTIMEFORMAT",
        "HOME",
        "HOSTFILE",
        "HOSTNAME",
        "HOSTTYPE",
        "IFS",
        "IGNOREEOF",
        "INPUTRC",
        "INSIDE_EMACS",
        "LANG",
        "LC_ALL",
        "LC_COLLATE",
        "LC_CTYPE",
        "LC_MESSAGES",
        "LC_NUMERIC",
        "LC_TIME",
        "LINENO",
        "LINES",
        "MACHTYPE",
        "MAIL",
        "MAILCHECK",
        "MAILPATH",
        "MAPFILE",
        "OLDPWD",
        "OPTARG",
        "OPTERR",
        "OPTIND",
        "OSTYPE",
        "PATH",
        "PIPESTATUS",
        "POSIXLY_CORRECT",
        "PPID",
        "PROMPT_COMMAND",
        "PROMPT_DIRTRIM",
        "PS0",
        "PS1",
        "PS2",
        "PS3",
        "PS4",
        "PWD",
        "RANDOM",
        "READLINE_ARGUMENT",
        "READLINE_LINE",
        "READLINE_MARK",
        "READLINE_POINT",
        "REPLY",
        "SECONDS",
        "SHELL",
        "SHELLOPTS",
        "SHLVL",
        "SRANDOM",
        "TIMEFORMAT",
        "TMOUT",
        "TMPDIR",
        "UID",
        "_",
        "histchars",
    }
)
"""The variables bash sets or reads itself (the manual's Shell Variables). A script's own
names are data; one of these is modelled only if it is in `MODELLED_VARIABLES`, and any other
name starting with `BASH_` is treated as one of bash's."""

MODELLED_VARIABLES = frozenset(
    {
        "CDPATH",
        "COLUMNS",
        "DIRSTACK",
        "HISTCONTROL",
        "HISTFILE",
        "HISTFILESIZE",
        "HISTIGNORE",
        "HISTSIZE",
        "HISTTIMEFORMAT",
        "HOME",
        "IFS",
        "LANG",
        "LC_ALL",
        "LC_COLLATE",
        "LC_CTYPE",
        "LC_MESSAGES",
        "LC_NUMERIC",
        "LC_TIME",
        "LINES",
        "MAPFILE",
        "OLDPWD",
        "OPTARG",
        "OPTERR",
        "OPTIND",
        "PATH",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "PWD",
        "REPLY",
        "TMOUT",
        "TMPDIR",
        "_",
    }
)
"""The variables of `BASH_VARIABLES` a script may assign with the reader still confident: their
values are data to it (a path, a locale, a history setting, the word separators of expansions
it already reads as unknown), or it reads them (`PROMPT_COMMAND`, `PS0`-`PS2`, `PS4`). Any
other of bash's variables changes what bash does in a way not modelled (`POSIXLY_CORRECT`,
`EXECIGNORE`, `BASH_ENV`, `BASHOPTS`, `BASH_XTRACEFD`, ...): assigning it makes the script
unsure."""
