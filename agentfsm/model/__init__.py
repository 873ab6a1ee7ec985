"""The vocabulary: the records every other part of agentfsm speaks in.

types (turns, calls, results, decisions, the states and exit reasons), snapshot (the frozen
view guards read), run_state (a run's mutable counters, written only by the states), tools
(tool declarations and their JSON Schemas), permissions and shell (who may run what),
limits, pricing and call_identity (keys for repeated calls).

This is the bottom of the package: it imports only `agentfsm.exceptions`, so guards,
states, providers and the engine can all build on it. The `__init__` imports nothing; the
public names are re-exported by `agentfsm`.
"""
