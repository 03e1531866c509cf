"""Observable properties for view-models, and two-way bindings to widgets.

A view-model is a ``QObject`` that declares, side by side, ``name = Prop(default)`` and
``name_changed = Signal(object)``. Assigning emits ``name_changed`` only when the value really
changed (numpy arrays compare by identity). ``bind`` connects a property to a widget in both
directions and returns a ``Binding`` that can be disconnected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

import numpy as np
from PySide6.QtCore import QObject, SignalInstance

T = TypeVar("T")


class Prop(Generic[T]):
    def __init__(self, default: T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        if not hasattr(owner, f"{name}_changed"):
            raise TypeError(f"{owner.__name__}.{name} needs a {name}_changed = Signal(object)")

    @overload
    def __get__(self, obj: None, owner: type) -> Prop[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> T | Prop[T]:
        if obj is None:
            return self
        return obj.__dict__.get(self.name, self.default)

    def __set__(self, obj: object, value: T) -> None:
        old = obj.__dict__.get(self.name, self.default)
        if same(old, value):
            return
        obj.__dict__[self.name] = value
        getattr(obj, f"{self.name}_changed").emit(value)


def same(a: object, b: object) -> bool:
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


class Binding:
    def __init__(self, connections: list[tuple[SignalInstance, Callable[..., Any]]]) -> None:
        self._connections = connections

    def disconnect(self) -> None:
        for signal, slot in self._connections:
            with contextlib.suppress(RuntimeError, TypeError):  # the widget is already gone
                signal.disconnect(slot)
        self._connections = []


def bind(
    model: QObject,
    name: str,
    set_widget: Callable[[Any], None],
    widget_changed: SignalInstance | None = None,
    *,
    to_model: Callable[[Any], Any] = lambda v: v,
    to_widget: Callable[[Any], Any] = lambda v: v,
) -> Binding:
    """Keep ``model.<name>`` and a widget in sync; the widget is set from the model at once."""
    updating = False

    def model_to_widget(value: object) -> None:
        nonlocal updating
        if updating:
            return
        updating = True
        try:
            set_widget(to_widget(value))
        finally:
            updating = False

    def widget_to_model(*args: object) -> None:
        nonlocal updating
        if updating:
            return
        updating = True
        try:
            setattr(model, name, to_model(args[0] if args else None))
        finally:
            updating = False

    model_to_widget(getattr(model, name))
    changed: SignalInstance = getattr(model, f"{name}_changed")
    changed.connect(model_to_widget)
    connections: list[tuple[SignalInstance, Callable[..., Any]]] = [(changed, model_to_widget)]
    if widget_changed is not None:
        widget_changed.connect(widget_to_model)
        connections.append((widget_changed, widget_to_model))
    return Binding(connections)
