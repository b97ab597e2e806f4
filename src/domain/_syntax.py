"""The two small languages of the settings: durations and ``kind(option=value,…)`` steps.

* A **duration** is seconds, as a number or text with an optional unit: ``30``, ``30s``,
  ``10m``, ``2h``, ``1d`` (``0.2`` and ``1.5m`` where fractions are allowed).
* A **step** is a kind with optional options, ``retry(attempts=5,delay=0.2)`` or ``none``;
  an option name may use ``-`` for ``_``. Each kind declares its options and how each
  value is read (``whole_number``, ``real_number``, ``seconds``, ``word``).

Every error is a ``ValueError`` with a one-line message naming the offending option or value.
Error policies (``domain._policies``), restart strategies (``domain._restart``) and rule windows
(``domain._rules``) are written in these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

OptionReader = Callable[[str, str], Any]

_DURATION = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+|(?i:nan|inf(?:inity)?)))\s*(ms|[smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_STEP = re.compile(r"^\s*([a-z-]+)\s*(?:\((.*)\))?\s*$")
MAX_COUNT = 1_000_000_000  # attempts, failures: more is a typo
MAX_DURATION_DAYS = 3650  # longer is a typo: no window, delay or timeout of a running job is ten years


def parse_duration(value: str | int | float, name: str = "the duration", *, whole: bool = True) -> int | float:
    """Seconds from ``30``, ``"250ms"``, ``"30s"``, ``"10m"``, ``"2h"`` or ``"1d"``: an ``int`` of whole
    seconds, or with ``whole=False`` a float that may have a fraction (``"0.2"``).

    Raises ValueError naming ``name`` for text that is not a duration, nan, infinity, a
    negative duration, one over ``MAX_DURATION_DAYS``, or (``whole``) a fraction of a second.
    """
    seconds = _seconds(value, name)
    if seconds < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    if seconds > MAX_DURATION_DAYS * 86400:
        raise ValueError(f"{name} must be at most {MAX_DURATION_DAYS}d, got {value!r}")
    if not whole:
        return float(seconds)
    if seconds != int(seconds):
        raise ValueError(f"{name} must be whole seconds, got {value!r}")
    return int(seconds)


def _seconds(value: str | int | float, name: str) -> int | float:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        seconds = value
    else:
        match = _DURATION.match(value) if isinstance(value, str) else None
        if not match:
            raise ValueError(
                f"{name} must be seconds with an optional unit ms, s, m, h or d "
                f"(e.g. 30, 250ms, 30s, 10m, 2h, 1d), got {value!r}"
            )
        seconds = round(float(match.group(1)) * _UNIT_SECONDS[match.group(2)], 9)
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite duration, got {value!r}")
    return seconds


def seconds(name: str, text: str) -> float:
    """An option holding a duration that may have a fraction (a delay)."""
    return parse_duration(text, name, whole=False)


def whole_number(name: str, text: str) -> int:
    """An option holding a count: a whole number, not negative."""
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None
    if number < 0:
        raise ValueError(f"{name} must not be negative, got {text!r}")
    if number > MAX_COUNT:
        raise ValueError(f"{name} must be at most {MAX_COUNT:,}, got {text!r}")
    return number


def real_number(name: str, text: str) -> float:
    """An option holding a finite number, not negative (a factor)."""
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {text!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {text!r}")
    if number < 0:
        raise ValueError(f"{name} must not be negative, got {text!r}")
    return number


def word(name: str, text: str) -> str:
    """An option holding a word, checked by whoever uses it."""
    return text


def parse_step(
    text: str, kinds: Mapping[str, Mapping[str, OptionReader]], what: str = "the step"
) -> tuple[str, dict[str, Any]]:
    """``kind(name=value,…)`` → ``(kind, {name: value})``, each value read by its kind's reader.

    Raises ValueError when the kind is not one of ``kinds`` (the message starts with
    ``what``), for an option the kind does not take, or a value its reader refuses.
    """
    match = _STEP.match(text or "")
    if not match or match.group(1) not in kinds:
        alternatives = ", ".join(f"{kind}(...)" for kind in kinds)
        raise ValueError(f"{what} must be one of {alternatives}; got {(text or '').strip()!r}")
    kind, options = match.group(1), {}
    for item in filter(None, (part.strip() for part in (match.group(2) or "").split(","))):
        name, _, value = (part.strip() for part in item.partition("="))
        name = name.replace("-", "_")
        if name not in kinds[kind]:
            raise ValueError(f"{kind} takes {', '.join(kinds[kind]) or 'no options'}; got {name!r}")
        options[name] = kinds[kind][name](name, value)
    return kind, options
