"""Statistics used above bench: comparisons with verdicts, change points over a series, attribution."""
