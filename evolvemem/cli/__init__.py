"""The `evolve` command line."""
