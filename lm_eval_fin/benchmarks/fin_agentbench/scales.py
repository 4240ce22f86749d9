"""The scale of every FinAgentBench metric (:mod:`lm_eval_fin.measures.scales`):
nDCG, MAP and MRR at each cut-off (FinAgentBench's @5, FinCARDS's @10)."""

from __future__ import annotations

from lm_eval_fin.measures.scales import Scale, share, total

SCALES: dict[str, Scale] = {
    r"ndcg@\d+": share("ndcg"),
    r"map\w*@\d+": share("map"),  # MAP, and MAP under another paper's convention
    r"mrr@\d+": share("mrr"),
    r"parse_failure|degenerate_answer": share("failure_rate"),
    r"truncated_(documents|answers)": total("truncation"),
}
