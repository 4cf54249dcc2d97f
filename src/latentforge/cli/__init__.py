"""The command line: one thin module per verb over one library function; main.py maps errors to exit codes."""
