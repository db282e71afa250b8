"""Checks of option values (CodeMode's, OutputLimits'): a wrong value is refused where it is given,
with its name, rather than failing at the first cell with a message that names nothing.

Standard library only: every part of kernel/ may use it.
"""

from __future__ import annotations

import math


def check_seconds(name: str, value: object, *, positive: bool = False, allow_none: bool = False) -> None:
    """A duration in seconds: a finite real number, at least 0 (above 0 with ``positive``), or ``None`` with ``allow_none``.

    Raises:
        TypeError: not a number (``bool`` counts as not one).
        ValueError: negative, zero with ``positive``, infinite or NaN.
    """
    if value is None and allow_none:
        return
    none = " (or None for no limit)" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds{none}, got {value!r}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a {'positive' if positive else 'non-negative'}, finite number of seconds{none}, got {value!r}")


def check_count(name: str, value: object, *, minimum: int = 0, allow_none: bool = False) -> None:
    """A whole number (a count, a size in bytes or characters) of at least ``minimum``, or ``None`` with ``allow_none``.

    Raises:
        TypeError: not an ``int`` (``bool`` counts as not one).
        ValueError: below ``minimum``.
    """
    if value is None and allow_none:
        return
    none = " (or None)" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number{none}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}{none}, got {value}")


def check_flag(name: str, value: object) -> None:
    """``True`` or ``False``: a string such as ``"no"`` is refused, not taken as true.

    Raises:
        TypeError: anything else.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
