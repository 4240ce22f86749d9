"""FinAgentBench (Choi et al., ACM ICAIF 2025): ranking document types and filing chunks."""
