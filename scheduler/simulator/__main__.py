"""`python -m scheduler.simulator --trace philly --policy strict,idle,pool`: the simulate command without Django."""

import sys

from .cli import main

sys.exit(main())
