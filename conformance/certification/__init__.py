"""The certification artefacts: the report and its page, the measurements and charts of
timing tests, where a report comes from (provenance), the verdict skips, and verify-report.
Checking a report loads no cluster provider or installer (pyproject.toml's contracts)."""
