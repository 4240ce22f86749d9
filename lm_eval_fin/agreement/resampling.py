"""How an agreement study resamples: its defaults and settings (kept apart from the statistics
so that the command's arguments load without scipy and scikit-learn)."""

from __future__ import annotations

from dataclasses import dataclass

CONFIDENCE = 0.95
RESAMPLES = 1000  # percentile bootstrap resamples per interval


@dataclass(frozen=True)
class StudySettings:
    resamples: int = RESAMPLES
    seed: int = 0
    confidence: float = CONFIDENCE
