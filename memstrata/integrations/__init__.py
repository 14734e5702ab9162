"""Adapters that put memstrata behind other frameworks' interfaces (each imports its
framework lazily, behind an extra)."""
