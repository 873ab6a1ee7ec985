"""The `agentfsm` command line: `main` dispatches to one module per subcommand."""

from agentfsm.cli.command import main

__all__ = ["main"]
