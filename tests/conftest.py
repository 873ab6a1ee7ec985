"""Shared test set-up: hypothesis profiles, the marks of litellm tests, and where the trajectory
corpus is.

Property tests carry no example counts of their own: the profile decides. `quick` is
the default, so the README's test command stays short; CI also runs the suite's
properties with `--hypothesis-profile=deep`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "quick",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,  # a failing property prints the @reproduce_failure line that replays it
)
settings.register_profile(
    "deep",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("quick")  # `--hypothesis-profile=deep` (hypothesis' own option) overrides

LITELLM_CLIENT = [
    pytest.mark.litellm,
    # litellm (1.110) builds its streaming Delta schema lazily, on the first streamed
    # chunk, and pydantic warns that litellm's TypedDicts (ChatCompletionThinkingBlock,
    # ...) use `ReadOnly`: the warning is about litellm's types, not ours.
    pytest.mark.filterwarnings(
        "ignore:Items? .+ on TypedDict class .+ using the `ReadOnly` qualifier"
        ":UserWarning:pydantic._internal._generate_schema"
    ),
    # litellm reads every attribute of a streamed usage object, which pydantic 2.11+
    # answers with this deprecation when it reaches `model_computed_fields`.
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
        ":pydantic.warnings.PydanticDeprecatedSince211"
    ),
]
"""The marks of a test that drives litellm's real client: `pytestmark = LITELLM_CLIENT`."""

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "trajectories"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The trajectory corpus directory; the test fails (not skips) when it is missing."""
    if not (CORPUS / "SOURCES.md").is_file():
        pytest.fail(f"trajectory corpus missing: expected it at {CORPUS.resolve()}")
    return CORPUS.resolve()


# The modules whose tests start processes, clusters or servers (seconds each) run first. Under
# pytest-xdist the suite ends when its last long test does: started early, the long tests run
# side by side and the short ones fill the gaps; collected in name order, Ray and the examples
# came last and ran alone at the end.
SLOW_FIRST = (
    "tests/replay/test_replay_ray.py",
    "tests/durable/",
    "tests/integrations/test_real_clients.py",
    "tests/integrations/test_langgraph_checkpoint.py",
    "tests/test_examples_and_api.py",
    "tests/docs/",
    "tests/cli/test_mcp_proxy_real_servers.py",
    "tests/cli/test_mcp_proxy_hosts.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the slow modules' tests to the front, keeping the order within each part."""
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))


OPTIONAL_FOLDERS = {
    "durable": (("dbos", "litellm"), "durable,litellm"),
    "integrations": (
        ("langgraph", "agents", "pydantic_ai", "minisweagent", "opentelemetry"),
        "integrations,otel",
    ),
}
"""Test folders of optional parts: the modules their tests import, and the extras with them."""


@functools.cache
def left_out() -> dict[str, str]:
    """The optional folders left out here, each with what to install (none in CI)."""
    if os.environ.get("CI"):
        return {}
    found = {}
    for folder, (modules, extras) in OPTIONAL_FOLDERS.items():
        missing = [name for name in modules if importlib.util.find_spec(name) is None]
        if missing:
            found[folder] = (
                f"needs {', '.join(missing)}: pip install -e '.[{extras}]' "
                "(`make install` installs every extra)"
            )
    return found


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out an optional part's folder when its extra is not installed (said at the end).

    The core's tests run on the core's dependencies alone. In CI, which installs every
    extra, nothing is left out: a missing import fails the collection.
    """
    if collection_path.parent == Path(__file__).parent and collection_path.name in left_out():
        return True
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the folders left out for a missing extra, so none is left out silently."""
    if left_out():
        terminalreporter.section("not collected: optional parts not installed")
        for folder, why in sorted(left_out().items()):
            terminalreporter.line(f"tests/{folder}: {why}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test of an optional part (`needs(...)`, `litellm`) says what to install when it is not.

    The core's tests run on the core's dependencies alone; a test that drives litellm or a
    framework is skipped there, naming the module and the command that installs it. In CI,
    which installs every extra, a missing module fails the test instead of skipping it.
    """
    modules = [name for mark in item.iter_markers("needs") for name in mark.args]
    if item.get_closest_marker("litellm") is not None:
        modules.append("litellm")
    missing = sorted({name for name in modules if importlib.util.find_spec(name) is None})
    if not missing:
        return
    message = f"needs {', '.join(missing)}, from an optional extra: `make install` installs them"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI installs every extra)", pytrace=False)
    pytest.skip(message)
