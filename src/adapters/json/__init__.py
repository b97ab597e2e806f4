"""Reading records' JSON faster than the standard library, with the domain's answers.

Public names: ``read_event`` (a ``domain._ports.EventReader``: what the in-process engines judge
with) and ``decode_json`` (a ``domain._ports.JsonDecoder``: the JSON of any record).
"""

from adapters.json._decoder import decode_json
from adapters.json._event_reader import read_event

__all__ = ["decode_json", "read_event"]
