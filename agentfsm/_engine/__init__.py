"""The engine: what turns the vocabulary, guards and states into decisions.

routes (the one table of (source, guard, destination) rows), policy (what a run allows and
the table it builds), controller (the Controller that walks the table once per input),
machine (the one module that imports `transitions`, the reference walk and the diagram's
graph), events (observers and structlog), persistence (the versioned checkpoint).

It sits above `model`, `guards`, `states` and `providers`, and below everything that drives a
run (runner, replay, integrations, durable, cli). Nothing here imports litellm or does I/O
on the per-step path.
"""

from __future__ import annotations

from agentfsm._engine.policy import boundary_guards, build_routes
from agentfsm._engine.routes import Route, RouteTable

__all__ = ["Route", "RouteTable", "boundary_guards", "build_routes"]
