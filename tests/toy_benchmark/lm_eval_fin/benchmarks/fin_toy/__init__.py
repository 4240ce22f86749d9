"""fin_toy: a few questions with short answers, scored by exact match and by a judge's 0/1 verdict."""
