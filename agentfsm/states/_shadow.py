"""The shadow policy's verdict on a call: judged beside the enforced one, never enforced.

A shadow is a candidate policy run live beside the one that decides. Its verdict is
recorded in the decision (`Decision.shadow`) and the trace, and nothing else reads it:
whatever it answers, raises or does to the call it is shown, the call runs, waits or
is refused exactly as the enforced policy says. It is given a copy of the call, so a
hook that edits the arguments edits nothing that runs.
"""

from __future__ import annotations

from collections.abc import Callable

from agentfsm._model.call_history import CallHistory
from agentfsm._model.copies import own_call
from agentfsm._model.run_state import RunRules
from agentfsm._model.types import ShadowPermission, ShadowVerdict, ToolCall

__all__ = ["judged", "refused"]


def judged(
    shadow: RunRules,
    call: ToolCall,
    enforced: str,
    why: str,
    history: Callable[[], CallHistory],
) -> ShadowVerdict:
    """The shadow's verdict on a call that fits its tool, beside the enforced `(enforced, why)`.

    A shadow with a Cedar source is given the run's history, as the enforced policy is;
    `history` makes it only then.
    """
    said: ShadowPermission
    try:
        if shadow.cedar is None:
            permission, source = shadow.permission_verdict(own_call(call))
        else:
            permission, source = shadow.permission_verdict(own_call(call), history=history())
        said = permission if permission in ("allow", "ask") else "deny"
        source = str(source)
    except KeyboardInterrupt:  # the user's, not the shadow's: it stops the input as ever
        raise
    except BaseException as exc:
        said, source = "error", f"the shadow policy raised {type(exc).__name__}: {exc}"[:500]
    return _made(call, enforced, why, said, source)


def refused(call: ToolCall, why: str) -> ShadowVerdict:
    """A call that fits no declared tool: refused under any policy, the shadow included."""
    return _made(call, "deny", why, "deny", why)


def _made(call: ToolCall, enforced: str, why: str, said: str, source: str) -> ShadowVerdict:
    return ShadowVerdict._made(
        {
            "call_id": call.id,
            "tool": call.name,
            "enforced": enforced,
            "shadow": said,
            "source": source,
            "enforced_source": why,
        }
    )
