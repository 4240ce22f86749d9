"""BibTeX entries of the papers behind the benchmarks, each written once: the evaluate modules'
``_CITATION`` and ``lm-eval-fin``'s provenance read them here (the task READMEs show the same
entries to readers)."""

EMS = """\
@article{hu2025ems,
  title   = {Extract, Match, and Score: An Evaluation Paradigm for Long Question-context-answer
             Triplets in Financial Analysis},
  author  = {Hu, Bo and Yuan, Han and Pandelea, Vlad and Luo, Wuqiong and Zhao, Yingzhu and Ma, Zheng},
  journal = {arXiv preprint arXiv:2503.16575},
  year    = {2025}
}
"""

FINLFQA = """\
@inproceedings{long2025finlfqa,
  title         = {{FinLFQA}: Evaluating Attributed Text Generation of {LLMs} in Financial Long-Form
                   Question Answering},
  author        = {Long, Yitao and Hu, Tiansheng and Zhao, Yilun and Cohan, Arman and Zhao, Chen},
  booktitle     = {Findings of the Association for Computational Linguistics: EMNLP 2025},
  year          = {2025},
  eprint        = {2510.06426},
  archivePrefix = {arXiv}
}
"""

FINAGENTBENCH = """\
@inproceedings{choi2025finagentbench,
  title     = {{FinAgentBench}: A Benchmark Dataset for Agentic Retrieval in Financial Question Answering},
  author    = {Choi, Chanyeol and Kwon, Jihoon and Lopez-Lira, Alejandro and others},
  booktitle = {Proceedings of the 6th ACM International Conference on AI in Finance (ICAIF)},
  year      = {2025},
  eprint    = {2508.14052},
  archivePrefix = {arXiv}
}
"""

FINCARDS = """\
@article{zhou2026fincards,
  title   = {{FinCARDS}: Card-Based Analyst Reranking for Financial Document Question Answering},
  author  = {Zhou, Yixi and Zhang, Fan and Chen, Yu and Zhang, Haipeng and Nakov, Preslav and Xie, Zhuohan},
  year    = {2026}
}
"""

RAGCHECKER = """\
@inproceedings{ru2024ragchecker,
  title     = {{RAGChecker}: A Fine-grained Framework for Diagnosing Retrieval-Augmented Generation},
  author    = {Ru, Dongyu and others},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2024},
  eprint    = {2408.08067},
  archivePrefix = {arXiv}
}
"""
