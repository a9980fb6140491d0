"""Where the sink's progress lives (its tables' snapshots) and the one rule for where a partition resumes."""
