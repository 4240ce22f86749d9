"""The pure maths of scoring an answer: numbers, rankings, text similarity, precision/recall/F1, degenerate answers, and what a metric's values can be."""
