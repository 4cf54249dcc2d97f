"""Proving a cache faithful: the verify entry point, deep verify, re-encoding recorded batches, tolerances
and reconstruction quality."""
