"""The exceptions deepgrid raises: one class per kind of library error, same message text.

Every class derives from :class:`Error`, and also from the built-in exception it is closest
to, so ``except ValueError`` or ``except OSError`` catch them as one would expect.
"""


class Error(Exception):
    """Base class of every error from deepgrid's core."""


class InvalidArgument(Error, ValueError):
    """The input is wrong (a bad shape, size, stencil, index...); nothing was changed."""


class UnknownField(InvalidArgument, KeyError):
    """A grid has no field of that name (``g["v"]``); the message lists its fields."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


class NotFound(Error, FileNotFoundError):
    """A file or directory does not exist."""


class StorageError(Error, OSError):
    """The operating system reported an I/O error; the message names the file and offset."""


class NoSpace(StorageError):
    """Not enough disk space."""


class CorruptGrid(Error):
    """Stored data or metadata is inconsistent (a damaged grid)."""


class Unsupported(Error):
    """Valid, but not supported here (a newer format version, a filesystem feature)."""


class ResourceExhausted(Error, MemoryError):
    """The memory budget or another resource is exhausted."""


class GridBusy(Error, BlockingIOError):
    """Another process (or another open Grid) holds the grid: a run, an import, a writer."""


_BY_CODE = {
    "invalid_argument": InvalidArgument,
    "not_found": NotFound,
    "io": StorageError,
    "no_space": NoSpace,
    "corrupt": CorruptGrid,
    "unsupported": Unsupported,
    "resource": ResourceExhausted,
    "busy": GridBusy,
}


def error_class(code: str) -> type[Error]:
    """The exception class for a library error code (used by deepgrid._core)."""
    return _BY_CODE.get(code, Error)
