"""Statistics over repeats and over series: pure functions, no I/O."""
