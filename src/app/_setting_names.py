"""The names of the settings, and the closest valid name to a misspelt one.

A setting is named by its path through the settings model: ``rules.APP.window`` in a config
file, ``DEDUP_RULES__APP__WINDOW`` in the environment. Some levels are mappings whose keys are
free (a rule's type under ``rules``, a client setting under ``kafka.config``); every other part
must be a field of the model. ``misspelt`` finds the first part that is not, and names the path
with that part replaced by the closest field (``difflib``), for a message such as
``unknown setting DEDUP_RULE__APP__WINDOW: did you mean DEDUP_RULES__APP__WINDOW?``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel

ENV_PREFIX, ENV_DELIMITER = "DEDUP_", "__"
NOT_SETTINGS = ("DEDUP_CONFIG",)  # the config file's path, read before the settings
TOOL_PREFIX = "DEDUP_TEST_"  # the test suite's services (deploy/local/services), not the program's


@dataclass(frozen=True)
class Misspelt:
    """``path[index]`` is not a setting; ``closest`` is the path with it replaced (None: nothing close)."""

    path: tuple[str, ...]
    index: int
    closest: tuple[str, ...] | None

    def as_env(self) -> tuple[str, str | None]:
        return env_name(self.path), env_name(self.closest) if self.closest else None

    def as_dotted(self) -> tuple[str, str | None]:
        return ".".join(self.path), ".".join(self.closest) if self.closest else None


def env_name(path: Sequence[str]) -> str:
    return ENV_PREFIX + ENV_DELIMITER.join(path).upper()


def misspelt(model: type[BaseModel], path: Sequence[str], *, case_sensitive: bool = True) -> Misspelt | None:
    """None when ``path`` names a setting of ``model`` (or a part of one); else where it goes wrong."""
    path = tuple(path)
    current: Any = model
    index = 0
    while index < len(path):
        fields = current.model_fields
        part = path[index] if case_sensitive else path[index].lower()
        if part not in fields:
            match = difflib.get_close_matches(part.lower(), list(fields), n=1, cutoff=0.6)
            closest = (*path[:index], match[0], *path[index + 1 :]) if match else None
            return Misspelt(path, index, closest)
        annotation = _unwrapped(fields[part].annotation)
        index += 1
        if get_origin(annotation) is dict:
            index += 1  # a free key: a rule's type, a client setting
            annotation = _unwrapped(get_args(annotation)[1])
        if index < len(path) and not _is_model(annotation):
            return Misspelt(path, index, None) if get_origin(annotation) is not list else None
        current = annotation
    return None


def unknown_variables(model: type[BaseModel], environ: Mapping[str, str | None] | None = None) -> list[Misspelt]:
    """The ``DEDUP_*`` environment variables that name no setting (pydantic-settings ignores them)."""
    environ = os.environ if environ is None else environ
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_SETTINGS or upper.startswith(TOOL_PREFIX):
            continue
        path = tuple(upper.removeprefix(ENV_PREFIX).lower().split(ENV_DELIMITER))
        wrong = misspelt(model, path, case_sensitive=False)
        if wrong:
            found.append(wrong)
    return found


def _unwrapped(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, …]`` as ``X``."""
    while True:
        args = get_args(annotation)
        if get_origin(annotation) is not None and type(None) in args:
            annotation = next(a for a in args if a is not type(None))
        elif hasattr(annotation, "__metadata__"):
            annotation = args[0]
        else:
            return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
