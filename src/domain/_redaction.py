"""Secrets are never shown: the one redaction for URIs, settings and any text the program writes.

A secret is

* the user-info of a URI (``redis://user:password@host``): user and password both, shown as ``***``,
  whatever the password holds (``/``, ``?``, ``#``, ``@``: the user-info ends at the URI's last
  ``@``), and in the one-slash or no-slash typos of the project's schemes (``redis:/u:p@h``);
* the value of a setting or URI query parameter whose name looks secret (:func:`is_secret_name`:
  ``sasl.password``, ``ssl.key.password``, ``password``, ``token``, ``sasl.jaas.config``…);
* any value registered with :func:`remember` (every secret of the loaded settings is), wherever it
  turns up in a text: a client library may echo a bad value in its error.

:func:`redact_uri` shows a URI, :func:`redact_setting` a setting's value, :func:`redact` any text
(messages, log lines); the application's outputs (stderr, logs, reports) go through these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
_SECRET_NAME = re.compile(r"password|passwd|secret|jaas|token|credential|private|api[._-]?key|\.pem$", re.IGNORECASE)
_SCHEME = r"\b(?:[A-Za-z][A-Za-z0-9+.-]*://|(?:rediss?|kafka|unix|hdfs|https?|memory|file|jsonl):/?(?!/))"
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME})(?P<userinfo>[^\s'\"]*)@")  # greedy: to the URI's last @
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&\s'\"#]+)=(?P<value>[^&\s'\"#]*)")
_ASSIGNMENT = re.compile(
    r"(?P<name>[\w.-]+)(?P<close>['\"]?)(?P<sep>\s*[=:]\s*)(?P<quote>['\"]?)(?P<value>[^\s'\",;)}]+)"
)
_MIN_REMEMBERED = 3  # shorter values would mask ordinary text
_remembered: set[str] = set()


def is_secret_name(name: str) -> bool:
    """Whether a setting or parameter called ``name`` holds a secret (``sasl.password``, ``ssl.key.password``…)."""
    return bool(_SECRET_NAME.search(name))


def redact_setting(name: str, value: Any) -> Any:
    """``value`` as it may be shown for the setting ``name``: masked when the name looks secret,
    URIs redacted, other values as they are."""
    if is_secret_name(name):
        return MASK
    return redact(value) if isinstance(value, str) else value


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping of settings as it may be shown (:func:`redact_setting` on each)."""
    return {key: redact_setting(key, value) for key, value in settings.items()}


def redact_uri(uri: str) -> str:
    """``uri`` with its user-info and its secret query parameters masked."""
    return redact(uri)


def redact(text: str) -> str:
    """``text`` with every secret it shows masked: URI user-info, secret-named parameters and
    assignments (``sasl.password=x``, ``'ssl.key.password': 'x'``) and every remembered value."""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _QUERY_PARAM.sub(
        lambda m: f"{m['lead']}{m['name']}={MASK if is_secret_name(m['name']) else m['value']}", text
    )
    text = _ASSIGNMENT.sub(_mask_assignment, text)
    for secret in sorted(_remembered, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _mask_assignment(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or match["value"] == MASK:
        return match[0]
    return f"{match['name']}{match['close']}{match['sep']}{match['quote']}{MASK}"


def remember(values: Iterable[str]) -> None:
    """Register secret values to be masked wherever :func:`redact` meets them."""
    _remembered.update(v for v in values if isinstance(v, str) and len(v) >= _MIN_REMEMBERED and v != MASK)


def secrets_of_uri(uri: str) -> list[str]:
    """The secrets a URI holds: its user-info's parts (user, and password up to the last ``@``)
    and its secret query parameters' values."""
    match = _USERINFO.match(uri.strip())
    found: list[str] = []
    if match:
        user, _, password = match["userinfo"].partition(":")
        found += [user, password, unquote(user), unquote(password)]
        uri = uri.strip()[match.end() :]
    try:
        query = urlsplit(uri).query
    except ValueError:
        query = uri.partition("?")[2]
    found += [value for name, value in parse_qsl(query, keep_blank_values=True) if is_secret_name(name)]
    return list(dict.fromkeys(value for value in found if value))


def secrets_of_settings(settings: Mapping[str, Any]) -> list[str]:
    """The secrets in a (nested) mapping of settings: secret-named values and those of URIs."""
    found: list[str] = []
    for key, value in settings.items():
        if isinstance(value, Mapping):
            found += secrets_of_settings(value)
        elif isinstance(value, str):
            found += (
                [value]
                if is_secret_name(str(key))
                else secrets_of_uri(value)
                if _USERINFO.match(value) or "://" in value
                else []
            )
    return found
