"""A build run: the steps from plan to commit under the lock, scan, resume checks, estimates, progress and run
statistics."""
