"""Start-up of the command line: packages that two third-party modules import at module
level, for functions splitopt never calls, are imported only where something uses them.

* ``ortools.sat.python.cp_model`` (OR-Tools 9.15) runs ``import pandas as pd`` for its
  pandas-indexed functions (``CpModel.new_int_var_series``, ``CpSolver.values``, ...); at
  module level it reads ``pd.Index`` and ``pd.Series`` only, in type hints. pandas took
  0.13 s of the 0.67 s CPU time of ``splitopt solve instances/resnet50_eyeriss.json``.
* ``typer.rich_utils`` (the help's formatter) imports ``rich.markdown`` (markdown-it,
  pygments) for the ``markdown`` help mode and ``rich.traceback`` (attrs) for pretty
  tracebacks, neither of which the command line uses: 0.05 s of a 0.17 s ``--help``.

:func:`defer_unused_imports` installs an import hook, in the command line's own process
only (``splitopt.cli.main``; the library never installs it: there it is a guest in its
caller's process). While such a module is imported for the first time, and the package
is not imported yet, ``sys.modules`` holds a stand-in for the package, in which the names
the module reads at import (:data:`DEFERRED`) are placeholder classes and any other name
imports the real package. Once the module is imported the stand-in leaves ``sys.modules``
(``import pandas`` anywhere gets the real package) and stays only where the module keeps
it (``cp_model.pd``), where every name imports the real package on first use. A
placeholder is the real class on use: calling it, reading its attributes and
``isinstance``/``issubclass`` import the package and go to the real class (only
``type(x) is placeholder`` tells them apart, and neither module asks that). So every
function of these modules works as with the package imported up front. Where the
package is imported already, or blocked (``sys.modules[name] = None``), the hook does
nothing.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

#: module -> {package it imports at module level: the package's names it reads there}
DEFERRED: dict[str, dict[str, frozenset[str]]] = {
    "ortools.sat.python.cp_model": {"pandas": frozenset({"Index", "Series"})},
    "typer.rich_utils": {"rich.markdown": frozenset({"Markdown"}), "rich.traceback": frozenset({"Traceback"})},
}


class _Placeholder(type):
    """The type of a placeholder class: calling it, its attributes, ``isinstance`` and
    ``issubclass`` are the real class's (``_real()``, which imports the package)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(cls._real(), attr)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._real())

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._real())


class _StandIn(types.ModuleType):
    """A package's stand-in: while the module that imports it is imported, the names of
    ``hinted`` are placeholder classes; any other name, and every name afterwards, is the
    real package's (imported on first use)."""

    def __init__(self, name: str, hinted: frozenset[str]) -> None:
        super().__init__(name, f"stand-in for {name}, imported on first use (splitopt.cli.deferred_imports)")
        self._hinted = hinted
        self._importing = True
        self._placeholders: dict[str, type] = {}

    def _release(self) -> None:
        """Leave ``sys.modules``: from now on ``import NAME`` gives the real package."""
        self._importing = False
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]

    def _real(self, attr: str) -> Any:
        self._release()
        return getattr(importlib.import_module(self.__name__), attr)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._importing and attr in self._hinted:
            if attr not in self._placeholders:
                self._placeholders[attr] = _Placeholder(attr, (), {
                    "__module__": self.__name__, "_real": staticmethod(lambda: self._real(attr)),
                    "__doc__": f"{self.__name__}.{attr}, imported on first use (splitopt.cli.deferred_imports)"})
            return self._placeholders[attr]
        return self._real(attr)


class _Loader:
    """The module's own loader, run with the stand-ins in ``sys.modules`` (a loader as
    ``importlib`` asks for one: ``create_module`` and ``exec_module``; ``importlib.abc``
    is not imported for its base class, it costs 5 ms)."""

    def __init__(self, loader: Any, deferred: dict[str, frozenset[str]]) -> None:
        self._loader = loader
        self._deferred = deferred

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        stand_ins = [_StandIn(package, hinted) for package, hinted in self._deferred.items()
                     if package not in sys.modules]
        for stand_in in stand_ins:
            sys.modules[stand_in.__name__] = stand_in
        try:
            self._loader.exec_module(module)
        finally:
            for stand_in in stand_ins:
                stand_in._release()

    def __getattr__(self, attr: str) -> Any:  # get_source, get_filename, ...: the module's own loader's
        return getattr(self._loader, attr)


class _Finder:
    """Finds a module of :data:`DEFERRED` as the other finders do and gives it :class:`_Loader`."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        deferred = DEFERRED.get(fullname)
        if deferred is None or all(package in sys.modules for package in deferred):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, deferred)  # type: ignore[assignment]  # a duck-typed Loader (importlib.abc costs 5 ms of --help)
                return spec
        return None


def defer_unused_imports() -> None:
    """Install the hook (once) in this process: for the command line's process only."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
