"""What agentfsm writes to the durable database: JSON, and it reads nothing else back.

DBOS pickles by default, and reads every row with the format the row names, so
a database someone could edit (a copied file, a shared volume) would run their
code in every process that reads a result or recovers a run. agentfsm's steps
are JSON data: values are stored as `{"value": ...}`, failures as
`{"error": ..., "kind": ...}` (the text, never the object), and a row that is
not such JSON, or that names pickle, raises `CheckpointError` instead of being
read.
"""

from __future__ import annotations

import json
from typing import Any

import dbos._serialization as dbos_serialization
from dbos import Serializer
from dbos._serialization import DefaultSerializer

from agentfsm.durable._data import check_stored
from agentfsm.exceptions import CheckpointError, DataError, DefinitionError, RunError

__all__ = ["FORMAT", "JsonSerializer", "RecordedError", "failure_text", "refuse_pickles"]

FORMAT = "agentfsm_json"
"""The name DBOS records in the `serialization` column of every row agentfsm writes."""


class RecordedError(RunError):
    """A step's or run's failure as the database recorded it: its type's name and its text."""

    def __init__(self, message: str, *, kind: str = "Exception", **details: Any) -> None:
        super().__init__(message, kind=kind, **details)
        self.kind = kind


def failure_text(exc: BaseException) -> str:
    """`Type: message` of a failure, the same whether it was raised now or read back."""
    if isinstance(exc, RecordedError):
        return f"{exc.kind}: {exc.message}" if exc.message else exc.kind
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ raises is still a failure to record
        message = "<unprintable>"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class JsonSerializer(Serializer):
    """DBOS's serializer for agentfsm: JSON data in, JSON data out, never an object."""

    def name(self) -> str:
        return FORMAT

    def serialize(self, data: Any) -> str:
        if isinstance(data, BaseException):
            payload: dict[str, Any] = {"error": _message(data), "kind": _kind(data)}
        else:
            payload = {"value": data}
        try:
            return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError) as exc:
            # The entry points check what callers give before this; a value that still
            # gets here (a step's output) is named as well as it can be, in agentfsm's error.
            check_stored(data, "the durable database", "a value to write")
            raise DataError(
                f"the durable database cannot store a value as JSON: {exc}",
                problems=[("value", str(exc))],
            ) from exc

    def deserialize(self, serialized_data: str) -> Any:
        try:
            payload = json.loads(serialized_data)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _edited(f"it is not JSON ({type(exc).__name__})") from None
        if isinstance(payload, dict) and payload.keys() == {"value"}:
            return payload["value"]
        if (
            isinstance(payload, dict)
            and payload.keys() == {"error", "kind"}
            and isinstance(payload["error"], str)
            and isinstance(payload["kind"], str)
        ):
            return RecordedError(payload["error"], kind=payload["kind"])
        raise _edited("it is JSON, but not a value or a failure agentfsm wrote")


def _kind(exc: BaseException) -> str:
    return exc.kind if isinstance(exc, RecordedError) else type(exc).__name__


def _message(exc: BaseException) -> str:
    if isinstance(exc, RecordedError):
        return exc.message
    text = failure_text(exc)
    return text.split(": ", 1)[1] if ": " in text else ""


def _edited(why: str) -> CheckpointError:
    return CheckpointError(
        f"a value in the durable database cannot be read: {why}; agentfsm writes only "
        "its own JSON there, so the database was edited or written by something else"
    )


class _NoPickle(DefaultSerializer):
    """Stands in for DBOS's pickle serializer: reading a pickle is refused, and what DBOS
    would pickle (an error of a row that names pickle) is written as agentfsm's JSON."""

    def serialize(self, data: Any) -> str:
        return JsonSerializer().serialize(data)

    def deserialize(self, serialized_data: str) -> Any:
        raise _edited("it names the pickle format, which agentfsm never reads")


def refuse_pickles() -> None:
    """Make DBOS refuse any row that names the pickle format, in this process.

    DBOS picks the reader from the row's `serialization` column, so the configured
    serializer alone would still unpickle a row edited to say `py_pickle`; its
    module-level pickle serializer is the one every such row goes through.
    """
    if not isinstance(dbos_serialization.DBOSDefaultSerializer, _NoPickle):
        dbos_serialization.DBOSDefaultSerializer = _NoPickle()
    # Fail closed if a DBOS release reads pickles some other way: check it here, once.
    probe = DefaultSerializer().serialize(0)
    try:
        dbos_serialization.deserialize_value(probe, DefaultSerializer().name(), JsonSerializer())
    except CheckpointError:
        return
    raise DefinitionError(
        "this DBOS release still reads pickles from the database: agentfsm.durable refuses "
        "to run on it (install the dbos version pinned by agentfsm[durable])"
    )
