"""The logic of a build, with no processes in it: plan, probe, decode a sample, run a unit of work, the text
stage, and the models a unit runs."""
