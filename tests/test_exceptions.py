"""Every error has one root, is kept apart by who must act, carries its context and pickles."""

from __future__ import annotations

import pickle

import pytest

from agentfsm import AgentFSMError
from agentfsm import exceptions as exc

DEFINITION = [
    exc.MachineDefinitionError,
    exc.PolicyError,
    exc.DataError,
    exc.ToolDefinitionError,
]
RUN = [
    exc.PayloadError,
    exc.TraceError,
    exc.UnknownCallIdError,
    exc.InvalidInputError,
    exc.CheckpointError,
    exc.ProviderError,
]
ALL = [exc.AgentFSMError, exc.DefinitionError, exc.RunError, *DEFINITION, *RUN]


class TestTree:
    @pytest.mark.parametrize("cls", ALL)
    def test_every_error_is_an_agentfsm_error(self, cls: type[AgentFSMError]) -> None:
        """Catching AgentFSMError catches every error agentfsm raises."""
        assert issubclass(cls, AgentFSMError)
        assert issubclass(cls, Exception)

    @pytest.mark.parametrize("cls", DEFINITION)
    def test_definition_errors_are_not_run_errors(self, cls: type[AgentFSMError]) -> None:
        """Mistakes in the machine, policy or tools are DefinitionErrors, never RunErrors."""
        assert issubclass(cls, exc.DefinitionError)
        assert not issubclass(cls, exc.RunError)

    @pytest.mark.parametrize("cls", RUN)
    def test_run_errors_are_not_definition_errors(self, cls: type[AgentFSMError]) -> None:
        """Failures during a run are RunErrors, never DefinitionErrors."""
        assert issubclass(cls, exc.RunError)
        assert not issubclass(cls, exc.DefinitionError)

    def test_the_public_names_are_the_tree(self) -> None:
        """`agentfsm.exceptions.__all__` lists exactly the classes of the tree."""
        assert sorted(exc.__all__) == sorted(cls.__name__ for cls in ALL)

    def test_the_root_is_re_exported(self) -> None:
        """`agentfsm.AgentFSMError` is the same class as `agentfsm.exceptions.AgentFSMError`."""
        assert AgentFSMError is exc.AgentFSMError


class TestContext:
    def test_carries_message_state_turn_and_details(self) -> None:
        """The constructor's context is kept as attributes."""
        error = exc.TraceError("bad line", state="parse", turn=3, path="run.jsonl", line=7)
        assert error.message == "bad line"
        assert (error.state, error.turn) == ("parse", 3)
        assert error.details == {"path": "run.jsonl", "line": 7}

    def test_str_names_state_and_turn(self) -> None:
        """The text says where it happened, when known."""
        assert (
            str(exc.InvalidInputError("no", state="execute", turn=2))
            == "no [state=execute, turn=2]"
        )
        assert str(exc.InvalidInputError("no", turn=0)) == "no [turn=0]"
        assert str(exc.InvalidInputError("no")) == "no"


class TestPickling:
    @pytest.mark.parametrize("cls", ALL)
    def test_a_round_trip_keeps_everything(self, cls: type[AgentFSMError]) -> None:
        """Each error pickles and unpickles with its class, message, state, turn and details."""
        error = cls("went wrong", state="validate", turn=4, path="p.json", line=2)
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is cls
        assert again.message == "went wrong"
        assert (again.state, again.turn) == ("validate", 4)
        assert again.details == {"path": "p.json", "line": 2}
        assert str(again) == str(error)

    def test_a_round_trip_without_context(self) -> None:
        """An error with only a message pickles too."""
        again = pickle.loads(pickle.dumps(exc.PolicyError("bad policy")))
        assert (again.message, again.state, again.turn, again.details) == (
            "bad policy",
            None,
            None,
            {},
        )
