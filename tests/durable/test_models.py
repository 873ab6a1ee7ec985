"""The durable part's public models raise agentfsm's errors, as the core's do."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel

import agentfsm.durable as durable
from agentfsm._model._checked import Checked
from agentfsm.exceptions import DataError

MODELS = [
    value
    for value in vars(durable).values()
    if inspect.isclass(value)
    and issubclass(value, BaseModel)
    and value.__module__.startswith("agentfsm.durable")
    and not value.__name__.startswith("_")
]


class TestDurableModels:
    def test_the_public_models_are_found(self) -> None:
        """The scan finds DurableResult (a broken scan would pass everything)."""
        assert "DurableResult" in {m.__name__ for m in MODELS}

    @pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
    def test_every_public_model_raises_data_error(self, model: type[BaseModel]) -> None:
        """Each public durable model derives from Checked, so bad fields raise DataError."""
        assert issubclass(model, Checked)
        with pytest.raises(DataError):
            model.model_validate({"unknown_field": object()})
