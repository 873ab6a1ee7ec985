"""agentfsm's own runner, `agentfsm.run(...)`, on a scripted model: the whole loop inside.

The runner is not there yet. Until it is, this reports "not available". Wiring it
means filling in `_scripted_run` below; everything else is shared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _harness import FINAL_TEXT, Builder, Run, UnavailableError, call_args, main


def _scripted_run(af: Any, n: int, echo: Callable[..., Any]) -> Callable[[], str]:
    """One run of `agentfsm.run` with a scripted model (N-1 echo calls, then FINAL_TEXT).

    `agentfsm.run(model, messages, *, tools, policy)` drives litellm; the bench needs an
    in-process scripted model for it (no HTTP, like the peers' fake models). Until the
    runner offers one, `_scripted_model` raises and the runner is reported unavailable.
    """
    model = _scripted_model(af, n)
    messages = [{"role": "user", "content": "go"}]
    policy = af.Policy(max_turns=n + 5)

    def run() -> str:
        return af.run(model, messages, tools=[echo], policy=policy).text

    return run


def _scripted_model(af: Any, n: int) -> Any:
    """The runner's scripted-model option: N-1 `echo({"i": k})` calls, then FINAL_TEXT."""
    scripted = getattr(getattr(af, "testing", None), "scripted_model", None)
    if scripted is None:
        raise AttributeError("the runner has no in-process scripted model yet")
    calls = [{"name": "echo", "arguments": call_args(k), "id": f"call_{k}"} for k in range(1, n)]
    return scripted([*([c] for c in calls), FINAL_TEXT])


def builders() -> dict[str, Builder]:
    """The runner variant, or `UnavailableError` while `agentfsm.run` is missing or unwired."""
    try:
        import agentfsm as af

        af.run  # noqa: B018 - fail here, not inside the timed run
    except (ImportError, AttributeError) as exc:
        raise UnavailableError(f"agentfsm.run: {exc}") from exc

    def build(n: int) -> Run:
        calls = 0

        def echo(i: int) -> dict[str, int]:
            """Return the argument unchanged."""
            nonlocal calls
            calls += 1
            return {"i": i}

        try:
            once = _scripted_run(af, n, echo)
            once()  # a dry run, so that a wrong wiring is reported before timing
        except (ImportError, AttributeError, TypeError) as exc:
            raise UnavailableError(f"agentfsm.run is not wired in the bench: {exc}") from exc

        def run() -> tuple[str, int]:
            nonlocal calls
            calls = 0
            return once(), calls

        return run

    return {"runner": build}


if __name__ == "__main__":
    main("agentfsm-runner", builders)
