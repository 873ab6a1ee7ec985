"""Plain attribute reads for the models the routing path reads on every step.

CPython reads an attribute of a class whose MRO defines `__getattr__` through
a generic hook, and its specializing interpreter never speeds those reads up.
pydantic's `BaseModel` defines `__getattr__` for private attributes and extra
fields. The models agentfsm reads on every step (turns, calls, results,
snapshots, decisions, policies) have neither, so for them pydantic's
`__getattr__` can only raise the `AttributeError` CPython raises on its own,
with the same message for any identifier. Giving those classes CPython's plain lookup makes a
full step about a tenth cheaper (`bench/RESULTS-hardening.md`).

CPython has no Python-level way to drop an inherited `__getattr__` from one
class, so `plain_lookup` writes the plain lookup into the class's
`tp_getattro` slot through `ctypes`. It writes only after checking, on this
very interpreter, where that slot is and what it holds; on any other
interpreter, layout or class it changes nothing, and reads stay correct, only
slower. Subclasses (a user's own model with private attributes, say) are built
by CPython from their own MRO and keep pydantic's lookup.
"""

from __future__ import annotations

import abc
import ctypes
import sys
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["plain_lookup", "plain_store_twin"]

_M = TypeVar("_M", bound=BaseModel)

_WORD = ctypes.sizeof(ctypes.c_void_p)
_SCAN_WORDS = 40
"""`tp_getattro` is the 19th word of a type object; 40 is ample and inside any type."""


def _address(name: str) -> int | None:
    try:
        return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
    except (AttributeError, ValueError):
        return None


def _word(obj: object, offset: int) -> int:
    return ctypes.c_void_p.from_address(id(obj) + offset).value or 0


class _Probe:
    """A class whose lookup is CPython's `__getattr__` hook, to recognise the hook."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


def _find_slot() -> tuple[int, int, int] | None:
    """The offset of `tp_getattro`, the plain lookup's address and the hook's, or None.

    The slot is the one word of `object`'s type that holds `PyObject_GenericGetAttr`
    and is followed by `PyObject_GenericSetAttr` (`tp_setattro`); a class with a
    `__getattr__` must hold something else there, and a class without one the same.
    """
    if sys.implementation.name != "cpython":
        return None
    plain, plain_set = _address("PyObject_GenericGetAttr"), _address("PyObject_GenericSetAttr")
    if plain is None or plain_set is None:
        return None

    class _Plain:
        pass

    found = [
        offset
        for offset in range(0, _SCAN_WORDS * _WORD, _WORD)
        if _word(object, offset) == plain and _word(object, offset + _WORD) == plain_set
    ]
    if len(found) != 1:
        return None
    offset = found[0]
    hook = _word(_Probe, offset)
    if hook in (0, plain) or _word(_Plain, offset) != plain:
        return None
    return offset, plain, hook


_SLOT = _find_slot()


class _StoreProbe:
    """A class whose stores go through CPython's `__setattr__` hook, to recognise the hook."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)


def _find_store() -> tuple[int, int, int] | None:
    """The offset of `tp_setattro` (the word after `tp_getattro`), the plain store and the hook."""
    if _SLOT is None:
        return None
    offset = _SLOT[0] + _WORD
    plain_set, hook = _address("PyObject_GenericSetAttr"), _word(_StoreProbe, offset)
    if plain_set is None or hook in (0, plain_set):
        return None
    return offset, plain_set, hook


_STORE = _find_store()


def plain_lookup(*classes: type[BaseModel]) -> bool:
    """Give each class CPython's plain attribute lookup; return whether all got it.

    A class is left as it is unless pydantic's own `__getattr__` is the one it
    inherits, it has no private attributes, it does not allow extra fields, and
    its slot holds the hook this interpreter uses for `__getattr__`.
    """
    if _SLOT is None:
        return False
    offset, plain, hook = _SLOT
    done = True
    for cls in classes:
        if not _eligible(cls) or _word(cls, offset) != hook:
            done = done and _word(cls, offset) == plain
            continue
        ctypes.c_void_p.from_address(id(cls) + offset).value = plain
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
    return done


def plain_store_twin(cls: type[_M]) -> type[_M] | None:
    """A bare subclass of `cls` whose instances take CPython's plain attribute stores, or None.

    Building a model without validation means filling its `__dict__` and pydantic's
    three slots. Through the slots' descriptors each store is a C call with an
    argument tuple; on an instance of this twin each is a plain store, and
    assigning `__class__ = cls` afterwards leaves an ordinary `cls` (same
    layout: the twin adds no slot). No instance of the twin outlives a build;
    the class itself shows only in `cls.__subclasses__()`, made once per class.
    None when the slot cannot be checked on this interpreter, or the class
    is not one of agentfsm's own (a user's class may act on being subclassed).
    """
    if cls not in _TWINS:
        _TWINS[cls] = _twin(cls)
    twin: type[_M] | None = _TWINS[cls]
    return twin


_TWINS: dict[type[BaseModel], Any] = {}


def _twin(cls: type[_M]) -> type[_M] | None:
    if _STORE is None or not cls.__module__.startswith("agentfsm."):
        return None
    offset, plain_set, hook = _STORE
    # ABCMeta's own __new__ (pydantic's metaclass derives from it) makes a plain
    # subclass with its ABC bookkeeping, without pydantic building a model class.
    # With object's own __init__, `twin()` makes an empty instance without a Python frame.
    namespace = {
        "__slots__": (),
        "__init__": object.__init__,
        "__module__": __name__,
        "__qualname__": f"_Twin[{cls.__name__}]",
    }
    twin: type[_M] = abc.ABCMeta.__new__(type(cls), cls.__name__, (cls,), namespace)
    if _word(twin, offset) != hook:
        return None
    ctypes.c_void_p.from_address(id(twin) + offset).value = plain_set
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(twin))
    try:  # the layouts must agree for `__class__` assignment; check it once here
        probe = twin()
        probe.__class__ = cls
    except TypeError:
        return None
    return twin


def _eligible(cls: type[BaseModel]) -> bool:
    """Whether pydantic's `__getattr__` can only raise CPython's own AttributeError for `cls`."""
    owner = next((k for k in cls.__mro__ if "__getattr__" in k.__dict__), None)
    return (
        owner is BaseModel
        and cls.__getattribute__ is object.__getattribute__
        and not cls.__private_attributes__
        and cls.model_config.get("extra") != "allow"
    )
