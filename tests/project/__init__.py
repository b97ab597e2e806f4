"""Checks of the whole repository: import architecture, lint, format and types, the docs site, the README walk-through."""
