"""Cosmos-Predict2 side files: T5 pickles for a dataset folder and the batch-inference JSON."""
