"""Files other tools read or write, for their users."""
