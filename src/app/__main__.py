"""``python -m app``: the ``dedup`` command, for a checkout without the installed script."""

import sys

from app.cli import main

sys.exit(main())
