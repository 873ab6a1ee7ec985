"""The `agentfsm` command line: `main` dispatches to one module per subcommand."""

from agentfsm._cli.command import main

__all__ = ["main"]
