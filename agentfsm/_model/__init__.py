"""The vocabulary: the records every other part of agentfsm speaks in.

types (turns, calls, results, decisions, the states and exit reasons), snapshot (the frozen
view guards read), run_state (a run's mutable counters, written only by the states), tools
(tool declarations and their JSON Schemas), limits, pricing and call_identity (keys for
repeated calls). Who may run what is decided above it, by the permission engine
(`agentfsm._permissions`) and the shell reader (`agentfsm._shell`).

This is the bottom of the package: it imports only `agentfsm.exceptions`, so guards,
states, providers and the engine can all build on it. The `__init__` imports nothing; the
public names are re-exported by `agentfsm`.
"""
