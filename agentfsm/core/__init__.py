"""The embeddable core: what a host imports to decide each step.

controller (the Controller), machine (the one module that imports `transitions`), policy,
run_state (a run's mutable counters and memory), snapshot (the frozen view guards read),
events (observers and structlog), call_identity (keys for repeated calls), tools (tool
declarations), types (turns, calls, results, decisions). The core never imports the runner,
replay, the command line or litellm; nothing here does I/O on the per-step path.

This package's `__init__` imports nothing, so `agentfsm.guards` and `agentfsm.states` can
import `agentfsm.core.types` without a cycle; the public names are re-exported by `agentfsm`.
"""
