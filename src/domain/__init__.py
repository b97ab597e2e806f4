"""The deduplication core: rules, semantics, error policies, state versioning and ports.

Standard library only; engines and adapters depend on this package, never the reverse.
"""
