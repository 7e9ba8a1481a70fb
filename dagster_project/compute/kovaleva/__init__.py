"""Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT": GLUE fine-tuning (Table 1), head and
layer ablation (Figs. 8-9) and pre-trained vs fine-tuned similarity (Fig. 5). Pattern classes
(Fig. 2) are rules on the attention pass's maps (compute/metrics.py)."""
