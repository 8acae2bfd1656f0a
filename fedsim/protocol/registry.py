"""Named registries: how a policy, a design or a message type joins the
framework without anyone editing a closed list.

A registry maps a name (as a config or cluster file spells it) to an object
(a class or a factory).  Modules register what they define when they are
imported; configs validate their names against ``names()``, so the allowed
values a user is shown are always the registered ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object, filled by ``register`` as modules are imported."""

    def __init__(self, what: str) -> None:
        self.what = what  # "placement policy", "design": used in error messages
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@HOMES.register("round_robin")``.  A name registered
        twice is an error unless it is the same definition again (a module
        re-imported or reloaded defines new objects with the same qualified name)."""

        def add(obj: T) -> T:
            old = self._items.get(name)
            if old is not None and _origin(old) != _origin(obj):
                raise ValueError(f"{self.what} {name!r} is already registered ({old!r})")
            self._items[name] = obj
            return obj

        return add

    def add(self, name: str, obj: T) -> T:
        return self.register(name)(obj)

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test that registered something for its own use)."""
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        """The object registered as ``name``; ValueError naming the allowed ones."""
        try:
            return self._items[name]
        except (KeyError, TypeError):
            near = difflib.get_close_matches(str(name), self._items, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"unknown {self.what} {name!r}; allowed: {', '.join(self._items)}{hint}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _origin(obj: object) -> tuple[str | None, str | None]:
    """Where an object was defined: the same pair means the same definition."""
    return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
