"""Stores: atomic, durable state changes behind one interface (see base.py)."""
