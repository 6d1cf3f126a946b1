"""``python -m mutation``: mutate the critical modules, print the score per module and the
survivors (docs/dev/testing.md)."""

from mutation._main import main

raise SystemExit(main())
