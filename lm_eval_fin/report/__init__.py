"""``lm-eval-fin report``: many lm-eval runs on one page, with intervals, paired tests, plots,
per-answer views and provenance. :func:`write_report` is the entry point for code."""

from lm_eval_fin.report.build import Report, build_report, write_report, write_report_files

__all__ = ["Report", "build_report", "write_report", "write_report_files"]
