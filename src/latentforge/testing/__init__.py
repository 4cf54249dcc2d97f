"""What only the test suite drives: fault points compiled into the build and commit paths, inert unless the
environment names them."""
