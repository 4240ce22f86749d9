"""Text as it enters and leaves: model output made safe to read, JSON and verdicts read out of replies, CSV cells escaped, the papers' citations."""
