"""The package's exceptions: one root, one subclass per kind of failure.

Every message is one line that names the offending field or constraint and the value,
so the CLI can print it as it is and exit with status 2 (bad input), 3 (an optional package
missing) or 1 (solver failure).
"""


class SplitoptError(Exception):
    """Root of every error splitopt raises on purpose."""


class InvalidInstance(SplitoptError):
    """The instance file is malformed, breaks the schema, or is inconsistent (cycle,
    dangling edge, unknown device, unsupported bit-width, ...)."""


class InvalidPlan(SplitoptError):
    """A plan does not match its instance (unknown or missing layer, bit-width not
    offered, edge set not closed under predecessors, ...)."""


class InvalidModel(InvalidInstance):
    """A torch module cannot be captured or does not match its instance or plan
    (untraceable by torch.export, example input of the wrong shape, layer names that
    differ from the instance's). A kind of InvalidInstance: bad input, CLI exit status 2."""


class UnknownSolver(SplitoptError):
    """The requested backend is not registered; the message lists the registered ones."""


class MissingDependency(SplitoptError):
    """An optional package is not installed (torch for the torch bridge, a solver
    package); the message names the package and the extra or command that installs it."""


class SolverUnavailable(MissingDependency):
    """The backend is registered but its package is not installed; the message gives the
    install command."""


class SolverFailure(SplitoptError):
    """A backend crashed or returned something inconsistent, e.g. its own objective value
    disagrees with the independent evaluator. This is a bug in splitopt."""


class InvalidOption(SplitoptError):
    """An option of a solve (time limit, threads, seed, a solver option) is unknown or
    out of range; the message names it, its value, and what is accepted."""


class NotApplicable(SplitoptError):
    """The backend cannot handle this instance (e.g. brute force on too many layers)."""
