"""One way to register: models (``models.register_model``) and tasks (``tasks.register_task``) both keep their
entries in a ``Registry``, which finds them by itself and refuses an unknown name the same way.

A registry loads its package's modules on the first lookup (every module of ``models/`` or ``tasks/`` whose name
does not start with ``_``), so adding a model or a task is one new file that registers itself, plus its
``params.yaml`` section: no import list, no list of modules to keep in step. An unknown name is an
``UnknownNameError``, one line with the nearest names; it is a ``SwarmlabError`` (a stage prints it and exits 2) and
a ``KeyError`` (a lookup that failed).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Generic, Iterator, TypeVar

from swarmlab.errors import SwarmlabError

T = TypeVar("T")


class UnknownNameError(SwarmlabError, KeyError):
    """An unknown registered name (a model, a task), with the nearest known names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Named entries of one kind (``what``: "model", "task"), registered by the modules of ``package``."""

    def __init__(self, what: str, package: str):
        self.what, self.package = what, package
        self._entries: dict[str, T] = {}
        self._loaded = False

    def load(self) -> None:
        """Import every module of the package once (each registers what it defines)."""
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test that registered a temporary entry)."""
        self._entries.pop(name, None)

    def replace(self, name: str, entry: T) -> None:
        self.get(name)
        self._entries[name] = entry

    def get(self, name: str) -> T:
        self.load()
        if name not in self._entries:
            close = difflib.get_close_matches(str(name), self._entries, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(self._entries))}"
            raise UnknownNameError(f"unknown {self.what} {name!r}{hint}")
        return self._entries[name]

    def names(self) -> list[str]:
        self.load()
        return sorted(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        self.load()
        return iter(sorted(self._entries.items()))
