"""Structured extraction (DESIGN.md, "Structured extraction"): the schema subset, the nullable
variant for map steps, and the check of a model's answer against the schema."""
