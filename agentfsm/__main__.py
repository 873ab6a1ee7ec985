"""`python -m agentfsm` is the `agentfsm` command."""

import sys

from agentfsm._cli import main

sys.exit(main())
