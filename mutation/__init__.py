"""``python -m mutation`` (``make mutation``): mutation testing of the safety-critical modules.

Each mutant is one small semantic edit (``_operators``) applied alone to a private copy of the
tree; the tests of the module's area (``_areas``) must fail against it. The score of a module is
the share of its mutants killed; the survivors are printed, to be killed by a new test or listed
in docs/dev/testing.md as equivalent.
"""
