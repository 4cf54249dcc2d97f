"""Readers turn a dataset listing (Cosmos folders, CSV/JSONL/Parquet tables) into source entries; registered by
name."""
