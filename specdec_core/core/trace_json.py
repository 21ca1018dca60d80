"""The JSON round-trip of the frozen traces of ``core/trace.py`` (and of any frozen
dataclass of plain values, numpy arrays and tuples): :func:`to_jsonable` and its inverse
:func:`from_jsonable`, driven by the dataclasses' type hints. Used by trace files
(``lessons/tracefile.py``), replays and benchmark results.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """Dataclasses → dicts, numpy arrays → lists, tuples → lists (recursively)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, list | tuple):
        return [to_jsonable(x) for x in obj]
    return obj


def from_jsonable(cls: Any, data: Any) -> Any:
    """Inverse of :func:`to_jsonable` for the trace types above.

    Raises:
        TypeError / KeyError: when ``data`` does not have the shape of ``cls``.
    """
    if data is None:
        return None
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(cls) if a is not type(None)]
        return from_jsonable(inner[0], data)
    if origin is tuple:
        (item,) = typing.get_args(cls)[:1]
        return tuple(from_jsonable(item, x) for x in data)
    if cls is np.ndarray:
        arr = np.asarray(data)
        return arr.astype(np.int64) if arr.dtype.kind in "iu" else arr.astype(np.float32)
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        return cls(  # a field with a default may be missing (JSON from an older version)
            **{
                f.name: from_jsonable(hints[f.name], data[f.name])
                for f in dataclasses.fields(cls)
                if f.name in data or f.default is dataclasses.MISSING
            }
        )
    if cls is float:
        return float(data)
    if cls in (int, str, bool):
        return cls(data)
    return data
