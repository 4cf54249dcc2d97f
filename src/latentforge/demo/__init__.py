"""The demo: a generated world of moving shapes, tiny text models, and a build that runs end to end on a CPU."""
