"""The CLI's run and demo subcommands drive litellm: reuse the runner's event-loop cleanup."""

from tests.runner.conftest import close_litellm_event_loop

__all__ = ["close_litellm_event_loop"]
