"""``python -m gputop_train`` is the same as the ``gputop-train`` command."""

import sys

from .cli import main

sys.exit(main())
