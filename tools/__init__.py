"""Developer tools of the project: durations, structure, progress (scripts the tests import)."""
