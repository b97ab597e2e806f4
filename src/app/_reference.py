"""The reference pages' generated parts: the command line, every setting and every metric, read from the code.

The documentation site (``scripts/mkdocs_hooks.py``) replaces a line ``<!-- generated: cli -->``
with ``cli_reference()``, ``<!-- generated: settings -->`` with ``settings_reference()`` and
``<!-- generated: metrics -->`` with ``metrics_reference()`` as it builds, so these pages cannot
drift from the parser (``app.cli.build_parser``), the settings model (``app._settings.Settings``)
and the metric catalog (``adapters.metrics._catalog``): nothing generated is kept in the repository.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from enum import Enum
from types import UnionType
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from app._setting_names import env_name
from domain import DEFAULT_RULES

RULE_TYPE = "<TYPE>"  # the free key of ``rules``: an event type


def cli_reference() -> str:
    """Markdown: ``dedup --help`` and every command's ``--help``, as the program prints them."""
    from app.cli import build_parser

    sections = []
    for name, parser in commands(build_parser()):
        sections.append(f"## `{name}`\n\n```text\n{_help_of(parser)}```\n")
    return "\n".join(sections)


def commands(parser: argparse.ArgumentParser, name: str = "dedup") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(``dedup COMMAND …``, its parser) of ``parser`` and every subcommand below it."""
    yield name, parser
    for action in parser._actions:  # argparse keeps no public list of a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from commands(sub, f"{name} {sub_name}")


def options(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """(``dedup COMMAND``, option) of every option of every command, ``--help`` aside."""
    for name, command in commands(parser):
        for action in command._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield name, action


def _help_of(parser: argparse.ArgumentParser) -> str:
    text = io.StringIO()
    with redirect_stdout(text):
        parser.print_help()
    return text.getvalue()


def metrics_reference() -> str:
    """Markdown: a table of every exported metric (its Prometheus name, type, labels and meaning)."""
    from adapters.metrics import CATALOG

    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for metric in CATALOG.values():
        labels = ", ".join(f"`{label}`" for label in metric.labels) or "–"
        rows.append(f"| `{metric.exported}` | {metric.kind} | {labels} | {metric.help} |")
    return "\n".join(rows) + "\n"


def settings_reference() -> str:
    """Markdown: a table of every setting (its path, environment variable, type and default)."""
    from app._settings import Settings

    rows = ["| setting | environment variable | type | default |", "|---|---|---|---|"]
    for path, annotation, default, duration in setting_leaves(Settings):
        kind = (
            "duration (e.g. `30`, `30s`, `10m`, `2h`, `1d`; a number is seconds)"
            if duration
            else _type_name(annotation)
        )
        rows.append(
            f"| `{'.'.join(path)}` | `{env_name([p.replace(RULE_TYPE, 'WEB') for p in path])}` | "
            f"{kind} | {_shown(default)} |"
        )
    defaults = ", ".join(f"`{r.event_type}` window `{r.window}`" for r in DEFAULT_RULES)
    return "\n".join(rows) + (
        f"\n\nRules given are laid over the default rules ({defaults}); a rule's "
        f"`allowed_lateness` defaults to its window, and a new type needs its `window`.\n"
    )


def setting_leaves(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any, Any, bool]]:
    """(path, annotation, default, takes a duration) of every setting of ``model``; a mapping to a
    model (``rules``) is walked under ``<TYPE>``."""
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        annotation = field.annotation
        factory = cast(Callable[[], Any] | None, field.default_factory)  # the settings' factories take no data
        default = factory() if factory is not None else field.default
        nested = _model_of(annotation)
        if nested is not None:
            yield from setting_leaves(nested, path)
            continue
        mapped = _mapped_model(annotation)
        if mapped is not None:
            yield from setting_leaves(mapped, (*path, RULE_TYPE))
            continue
        yield path, annotation, None if default is PydanticUndefined else default, _takes_duration(model, name)


def _takes_duration(model: type[BaseModel], name: str) -> bool:
    """Whether the field reads ``2m`` as 120 seconds (asked of the model's own validation)."""
    try:
        value = getattr(model.__pydantic_validator__.validate_python({name: "1m"}), name)
    except ValueError:
        return False
    return value == 60


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _mapped_model(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) is dict:
        args = get_args(annotation)
        return _model_of(args[1]) if len(args) == 2 else None
    return None


def _type_name(annotation: Any, top: bool = True) -> str:
    """How a value of ``annotation`` is written, in words (``top``: with how the environment spells it)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin is Annotated:
        return _type_name(args[0], top)
    if origin is Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin in (Union, UnionType):
        return " or ".join(_type_name(a, top) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0], False)}" + (" (comma-separated in the environment)" if top else "")
    if origin is dict:
        return f"mapping of text to {_type_name(args[1], False)}" + (" (JSON in the environment)" if top else "")
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " or ".join(f"`{m.value}`" for m in annotation)
    return {str: "text", int: "integer", float: "number", bool: "`true` or `false`"}.get(annotation, str(annotation))


def _shown(default: Any) -> str:
    if default is None:
        return "none"
    if isinstance(default, Enum):
        default = default.value
    if isinstance(default, (dict, list)) and not default:
        return "empty"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, list):
        return ", ".join(f"`{item}`" for item in default)
    return f"`{default}`"
