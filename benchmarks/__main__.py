"""``python -m benchmarks``: run the registered workloads, print the table, write the JSON."""

from benchmarks.harness import main

raise SystemExit(main())
