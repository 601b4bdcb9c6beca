"""What every heuristic offers: a name, its settings (checked by name, type and range
before any work), presets, and ``run(search, rng, seeds, config)``, which proposes
genomes to a :class:`splitopt.heuristics.search.Search` until it is done. The backend
adapter (``splitopt.backends.heuristic``) builds the search, seeds it with the family's
start plan and its baselines' plans, and turns the best plan into a result.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from splitopt.core.errors import InvalidOption
from splitopt.core.jsonfile import cut, shown
from splitopt.heuristics.search import Search, Termination
from splitopt.search.space import Genome


@dataclass(frozen=True)
class Setting:
    """One setting of a heuristic (``--option NAME=VALUE``): an ``int``, a ``float`` or a
    ``str`` out of ``choices``, within ``[low, high]``; ``None`` allowed where
    ``optional`` (no such limit)."""

    name: str
    kind: type
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False

    def check(self, value: Any) -> Any:
        """``value`` as this setting takes it; InvalidOption (one line) otherwise."""
        if value is None and self.optional:
            return None
        if self.kind is str:
            if value not in self.choices:
                raise InvalidOption(f"option '{self.name}': must be one of {', '.join(self.choices)}, got {shown(value)}")
            return value
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int and not (numeric and float(value).is_integer()):
            raise InvalidOption(f"option '{self.name}': must be an integer, got {shown(value)}")
        if not numeric or not math.isfinite(value):
            raise InvalidOption(f"option '{self.name}': must be a number, got {shown(value)}")
        value = self.kind(value)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise InvalidOption(f"option '{self.name}': must be in [{self.low:g}, {self.high:g}], got {shown(value)}")
        return value


#: the settings every heuristic takes: its termination rule (besides --time-limit)
TERMINATION = (
    Setting("evaluations", int, 10_000, "distinct plans to judge at most", low=1, high=10**9, optional=True),
    Setting("generations", int, None, "generations (RL: batches of episodes) at most", low=1, high=10**9,
            optional=True),
    Setting("stall", int, None, "stop after this many generations without a better plan", low=1, high=10**9,
            optional=True),
)


class Heuristic(ABC):
    """One heuristic search method (see the module docstring)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: its own settings (the termination settings are added)
    settings: ClassVar[tuple[Setting, ...]] = ()
    #: named bundles of settings (``--option preset=NAME``), e.g. a paper's configuration
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: importable modules it needs beyond the core (checked without importing them)
    requires: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def all_settings(cls) -> dict[str, Setting]:
        return {s.name: s for s in TERMINATION + cls.settings}

    @classmethod
    def configure(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults, then the preset's values, then the user's: every value checked;
        InvalidOption (one line) for an unknown name, preset or value."""
        known = cls.all_settings()
        config = {name: s.default for name, s in known.items()}
        options = dict(options)
        preset = options.pop("preset", None)
        if preset is not None:
            if preset not in cls.presets:
                names = ", ".join(cls.presets) or "none"
                raise InvalidOption(f"option 'preset': {shown(preset)} is not a preset of '{cls.name}' (presets: {names})")
            config.update(cls.presets[preset])
        for key, value in options.items():
            if key not in known:
                raise InvalidOption(f"option '{cut(key)}': not an option of solver '{cls.name}' (options: "
                                    f"{', '.join(sorted(known) + (['preset'] if cls.presets else []))})")
            config[key] = known[key].check(value)
        return config

    #: seconds :meth:`import_dependencies` may take (torch: 1.2-2.4 s measured on the shared
    #: 2-core machine); with less time left the backend does not start the search
    import_s: ClassVar[float] = 0.0

    @classmethod
    def import_dependencies(cls) -> None:
        """Import the modules :meth:`run` needs beyond the core; the backend calls this
        first, so that their import time (seconds for torch) is spent inside the time
        limit before the seeding's share of it is worked out, not after. The default
        imports nothing."""
        return None

    @staticmethod
    def termination(config: Mapping[str, Any]) -> Termination:
        return Termination(config["evaluations"], config["generations"], config["stall"])

    @abstractmethod
    def run(self, search: Search, rng: Any, seeds: Sequence[Genome], config: Mapping[str, Any]) -> None:
        """Propose genomes to ``search`` (``search.score``; ``search.end_generation`` after
        each generation) until ``search.done``; ``seeds`` are genomes of known good plans
        (the start plan, the baselines'), ``rng`` a seeded ``random.Random``."""
