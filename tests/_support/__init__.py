"""Helpers shared by the tests: data generators and the audit-writer process."""
