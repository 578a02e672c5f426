"""The packages of the ``interop`` extra, imported only when a feature needs one."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, feature: str) -> ModuleType:
    """``module`` imported; when it is not installed, a ModuleNotFoundError that says which
    feature needs it and how to install it (rather than a bare "No module named ...")."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        raise ModuleNotFoundError(
            f"{feature} needs {top}, which comes with deepgrid's interop extra: "
            f"pip install 'deepgrid[interop]' (or pip install {top})",
            name=top,
        ) from e
