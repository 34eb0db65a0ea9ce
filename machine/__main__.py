"""``python -m toolcancel``: the same as the ``toolcancel`` command."""

import sys

from .cli.main import main

sys.exit(main())
