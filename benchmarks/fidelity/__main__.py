"""``python -m benchmarks.fidelity``: the fidelity check measured on the labelled pairs."""

from benchmarks.fidelity.measure import main

raise SystemExit(main())
