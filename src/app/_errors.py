"""The application's errors: each stops ``dedup`` before any work with a one-line message
naming the setting (exit 2)."""

from __future__ import annotations


class UsageError(Exception):
    """A combination of settings the application cannot run; one line, names the settings."""


class SettingsError(Exception):
    """A setting is invalid; the message is one line naming it."""
