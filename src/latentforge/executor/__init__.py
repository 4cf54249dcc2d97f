"""Executors place units of work; base.py says what each one does."""
