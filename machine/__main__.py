"""``python -m toolcancel``: the same as the ``toolcancel`` command."""

import sys

from .cli import main

sys.exit(main())
