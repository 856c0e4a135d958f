"""What the store holds and reports, for every backend: typed rows, state machines and reports."""
