"""Provider wire formats in, one typed `ModelTurn` out.

`normalize` reads a response body, a list of stream events, JSON text, or an
SDK/litellm object; `StreamAccumulator` does the same one chunk at a time;
`detect_provider` names the format. The finish reason is always the provider's
own claim, mapped onto `FinishReason`; reconciling it with the structure is the
controller's job.
"""

from agentfsm import _public
from agentfsm.providers._normalize import StreamAccumulator, detect_provider, normalize
from agentfsm.providers._registry import Provider

PROVIDERS: tuple[str, ...] = tuple(Provider)
"""Every provider name `normalize` accepts."""

__all__ = ["PROVIDERS", "Provider", "StreamAccumulator", "detect_provider", "normalize"]


_public.publish(__name__, globals(), __all__)
