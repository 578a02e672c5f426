"""Schemes: update rules of several fields with time levels and coefficient fields.

A scheme is what ``deepgrid create --scheme`` and ``deepgrid run --scheme`` take
(docs/schemes.md): a preset (``wave2``, ``wave4``, ``wave8``, ``heat-var``), a JSON file, or
the same JSON form as Python data. The core parses and checks it, so a scheme built here is
exactly the one the engines run, and a bad one raises :class:`deepgrid.InvalidArgument` with
the core's message naming the offending entry.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from . import _core
from .stencils import Stencil


@dataclass(frozen=True)
class SchemeField:
    """One field of a scheme, as declared."""

    name: str
    kind: str  # "state" or "coefficient"
    levels: int  # time levels a state field keeps (1 for a coefficient field)
    value: float  # coefficient fields: the value a new grid gets


class Scheme:
    """A checked scheme, from a preset name, a JSON (or kernel library) file, Python data of
    the JSON form (a dict with ``fields`` and ``update``), or a :class:`Stencil`.

    >>> Scheme("wave8").components
    ['u', 'u@1', 'm']
    >>> Scheme({"fields": [{"name": "u"}, {"name": "k", "coefficient": True, "value": 0.1}],
    ...         "update": {"u": [{"field": "u"}, {"coef": "k", "stencil": "laplacian2", "field": "u"}]}})

    A dict's relative kernel library path (``{"kernel": "./libk.so"}``) is taken from the
    current directory, a file's from the file's directory.
    """

    def __init__(self, spec: SchemeLike, *, name: str = "custom") -> None:
        if isinstance(spec, Scheme):
            native = spec._native
        elif isinstance(spec, Stencil):
            native = _core.Scheme.from_record(spec.to_json())
        elif isinstance(spec, Mapping) and "points" in spec:  # a stencil's JSON form
            native = _core.Scheme.from_record(json.dumps({"name": name, **spec}))
        elif isinstance(spec, Mapping):
            native = _core.Scheme.from_json(json.dumps(spec), name, os.getcwd())
        elif isinstance(spec, (str, os.PathLike)):
            native = _core.Scheme.resolve(os.fspath(spec))
        else:
            raise TypeError(
                "a scheme is a preset name, a JSON file, a dict of the JSON form, a Stencil or a "
                f"Scheme; got {type(spec).__name__}"
            )
        self._native: _core.Scheme = native

    @classmethod
    def from_json(cls, text: str, name: str = "custom") -> Scheme:
        """Parses a scheme's (or a stencil's) JSON text; ``name`` when the text gives none."""
        return cls(json.loads(text), name=name)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # By its record: a kernel scheme carries its library's SHA-256, so a worker process
        # loads the same build or refuses (docs/security.md).
        return (Scheme._from_grid_record, (self.to_json(),))

    @classmethod
    def _from_grid_record(cls, text: str) -> Scheme:
        """The scheme a grid recorded; a kernel library it names loads only as the build
        whose SHA-256 the grid holds (docs/security.md)."""
        s = cls.__new__(cls)
        s._native = _core.Scheme.from_grid_record(text)
        return s

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fields(self) -> list[SchemeField]:
        """The declared fields, state and coefficient, in order."""
        return [
            SchemeField(name, "coefficient" if coefficient else "state", levels, value)
            for name, coefficient, levels, value in self._native.fields
        ]

    @property
    def components(self) -> list[str]:
        """What a grid of this scheme stores per point, in plane order: each state field's
        levels (``u``, ``u@1``: u one step earlier), then each coefficient field."""
        return list(self._native.components)

    @property
    def radius(self) -> int:
        """The update's largest reach along any axis (the halo it needs)."""
        return self._native.radius

    @property
    def is_stencil(self) -> bool:
        """Whether this is a plain stencil (one field, one term): its grids have one field."""
        return self._native.is_stencil

    def to_json(self) -> str:
        """The JSON a scheme file holds (a plain stencil's own JSON for a stencil)."""
        return self._native.to_json()

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scheme) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return f"deepgrid.Scheme({self._native.describe()!r})"


SchemeLike = Union[Scheme, Stencil, Mapping[str, Any], str, "os.PathLike[str]"]


def preset_names() -> list[str]:
    """Names of the scheme presets (stencil presets are :func:`deepgrid.stencils.preset_names`)."""
    return list(_core.scheme_preset_names())
