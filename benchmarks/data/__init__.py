"""Reading and rendering large runs: aggregate, report, compare view, the data commands."""
