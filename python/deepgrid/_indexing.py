"""numpy basic indexing of a grid, turned into one box read or write.

A key (integers, slices with any step, ``...``, ``None``) becomes a (start, count, step) range
with a positive step along each axis, plus the numpy indexing that turns the box, read in
increasing index order, into the result: reversing axes sliced with a negative step, dropping
axes indexed by an integer, and inserting the ``None`` axes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from .errors import InvalidArgument

Range = tuple[int, int, int]


@dataclass(frozen=True)
class Selection:
    ranges: tuple[Range, Range, Range]  # z, y, x: (start, count, step > 0)
    box_to_result: tuple[slice | int, ...]  # applied to the box array
    result_shape: tuple[int, ...]  # with the None axes
    new_axes: tuple[int, ...]  # positions of the None axes in result_shape

    @property
    def empty(self) -> bool:
        return any(count == 0 for _, count, _ in self.ranges)

    @property
    def box_shape(self) -> tuple[int, int, int]:
        return tuple(count for _, count, _ in self.ranges)  # type: ignore[return-value]


def _axis_index(item: object, n: int, axis: int) -> int:
    try:
        i = operator.index(item)  # int, numpy integer; not bool arrays or floats
    except TypeError:
        raise IndexError(
            f"grid indices must be integers, slices, ... or None (numpy basic indexing); "
            f"got {type(item).__name__}"
        ) from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return i + n if i < 0 else i


def _slice_range(s: slice, n: int) -> tuple[Range, bool]:
    """The positive-step range a slice selects, and whether the result runs backwards."""
    start, stop, step = s.indices(n)
    count = len(range(start, stop, step))
    if count == 0:
        return (0, 0, 1), False
    if step > 0:
        return (start, count, step), False
    return (start + (count - 1) * step, count, -step), True


def _expand(key: object) -> list[object]:
    items = list(key) if isinstance(key, tuple) else [key]
    for item in items:
        if isinstance(item, bool) or hasattr(item, "__len__"):
            raise IndexError(
                "grid indices must be integers, slices, ... or None; boolean and array "
                "(advanced) indexing is not supported: read a slice, then index the array"
            )
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    axes_named = sum(item is not None and item is not Ellipsis for item in items)
    if axes_named > 3:
        raise IndexError(f"too many indices for a 3-dimensional grid: {axes_named} were indexed")
    fill = [slice(None)] * (3 - axes_named)
    if Ellipsis in items:
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        return items[:at] + fill + items[at + 1 :]
    return items + fill


def select(key: object, shape: tuple[int, int, int]) -> Selection:
    ranges: list[Range] = []
    box_to_result: list[slice | int] = []
    result_shape: list[int] = []
    new_axes: list[int] = []
    for item in _expand(key):
        if item is None:
            new_axes.append(len(result_shape))
            result_shape.append(1)
            continue
        axis = len(ranges)
        n = shape[axis]
        if isinstance(item, slice):
            r, backwards = _slice_range(item, n)
            ranges.append(r)
            box_to_result.append(slice(None, None, -1) if backwards else slice(None))
            result_shape.append(r[1])
        else:
            ranges.append((_axis_index(item, n, axis), 1, 1))
            box_to_result.append(0)
    return Selection(tuple(ranges), tuple(box_to_result), tuple(result_shape), tuple(new_axes))  # type: ignore[arg-type]


def check_writable(mode: str, path: str) -> None:
    if mode != "r+":
        raise InvalidArgument(
            f"grid {path} was opened read-only; open it with deepgrid.open(path, mode='r+') "
            "to change values"
        )
