"""Whitespace as the domain's parser sees it, as a Spark (Java) regular expression.

``BLANK`` matches a text that Python's ``str.strip()`` empties: Unicode White_Space plus the
ASCII separators 0x1c-0x1f. It is the ``empty_field`` check of the parser (``stream._parse``)
and ``domain._events.is_blank_line`` for the lines of a directory (``stream._sources``).
"""

BLANK = r"(?U)^[\s\x1c-\x1f]*$"
