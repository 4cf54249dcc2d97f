"""Text encoders (T5, umT5) registered by name, the prompt cache, and Cosmos T5 pickles."""
