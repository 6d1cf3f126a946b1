"""Developer tools of the project: durations, structure, progress (run as scripts or imported by the tests)."""
