"""lm-eval-fin: financial long-form QA, attribution and retrieval for lm-evaluation-harness."""

__version__ = "0.1.0"
