"""`python -m agentfsm` is the `agentfsm` command."""

import sys

from agentfsm.cli.command import main

sys.exit(main())
