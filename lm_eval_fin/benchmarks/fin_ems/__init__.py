"""fin_ems: long answers about earnings calls, scored by EMS (Hu et al., 2025)."""
