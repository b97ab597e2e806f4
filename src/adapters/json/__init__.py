"""Reading records' JSON faster than the standard library, with the domain's answers.

Public names: ``decode_json`` (a ``domain.ports.JsonDecoder``).
"""

from adapters.json.decoder import decode_json

__all__ = ["decode_json"]
