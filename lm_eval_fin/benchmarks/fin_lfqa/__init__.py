"""FinLFQA (Long et al., Findings of EMNLP 2025): attributed long answers over 10-Q reports."""
