"""What lm-eval writes and we read back: the scored-answer record, a run's results and samples files, and which benchmark owns a task named in them."""
