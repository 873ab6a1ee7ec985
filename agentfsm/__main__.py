"""`python -m agentfsm` is the `agentfsm` command."""

import sys

from agentfsm._cli.command import main

sys.exit(main())
