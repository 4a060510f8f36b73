"""What the document says: its rules and clauses (catalog), the sync policy as an executable
model, the cases the model-based run aims for, and its profiles. Imports no cluster,
installer or pytest integration (pyproject.toml's import contracts)."""
