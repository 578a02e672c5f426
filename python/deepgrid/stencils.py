"""Stencils: the presets of the command line and any list of points.

A stencil is a list of points ``(dx, dy, dz, c)``:
``u'[z][y][x] = sum_k c_k * u[z+dz_k][y+dy_k][x+dx_k]``. Coefficients given for a preset are
either one per shell (points grouped by dx²+dy²+dz², centre first) or one per point.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from . import _core

Point = tuple[int, int, int, float]


class Stencil:
    """A validated stencil, its points in the canonical (dz, dy, dx) evaluation order.

    >>> Stencil(points=[(0, 0, 0, 0.6), (-1, 0, 0, 0.3), (0, -1, 0, 0.1)], name="upwind")
    """

    def __init__(self, points: Iterable[Sequence[float]], name: str = "custom") -> None:
        text = json.dumps({"name": name, "points": [list(p) for p in points]})
        self._init_from_json(_core.canonical_stencil(text))

    @classmethod
    def _from_json(cls, text: str) -> Stencil:
        s = cls.__new__(cls)
        s._init_from_json(text)
        return s

    def _init_from_json(self, text: str) -> None:
        j = json.loads(text)
        self._json = text
        self.name: str = j["name"]
        self.points: list[Point] = [(int(a), int(b), int(c), float(d)) for a, b, c, d in j["points"]]

    @property
    def radius(self) -> int:
        """The largest |offset| along any axis."""
        return max(max(abs(p[0]), abs(p[1]), abs(p[2])) for p in self.points)

    def to_json(self) -> str:
        """``{"name": ..., "points": [[dx, dy, dz, c], ...]}``, as stencil files hold it."""
        return self._json

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stencil) and (self.name, self.points) == (other.name, other.points)

    def __repr__(self) -> str:
        return f"Stencil(name={self.name!r}, points={self.points!r})"


def preset(name: str, coeffs: Sequence[float] | None = None) -> Stencil:
    """A preset by name (``7pt``, ``13pt``, ``19pt``, ``25pt``, ``27pt``, ``5pt``, ``9pt``)."""
    csv = "" if coeffs is None else ",".join(repr(float(c)) for c in coeffs)
    return Stencil._from_json(_core.preset_stencil(name, csv))


def preset_names() -> list[str]:
    """Names of the presets."""
    return list(_core.preset_names())


def seven_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """Centre and 6 faces (default: explicit heat diffusion, centre 1/4, faces 1/8)."""
    return preset("7pt", coeffs)


def thirteen_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """Radius-2 star."""
    return preset("13pt", coeffs)


def nineteen_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """Centre, faces and edges of the 3×3×3 box."""
    return preset("19pt", coeffs)


def twenty_five_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """Radius-4 star."""
    return preset("25pt", coeffs)


def twenty_seven_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """The full 3×3×3 box."""
    return preset("27pt", coeffs)


def five_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """2D star (for grids with nz = 1)."""
    return preset("5pt", coeffs)


def nine_point(coeffs: Sequence[float] | None = None) -> Stencil:
    """2D 3×3 box (for grids with nz = 1)."""
    return preset("9pt", coeffs)
