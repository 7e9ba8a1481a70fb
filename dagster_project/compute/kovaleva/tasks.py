"""The GLUE tasks that get fine-tuning, ablation and similarity assets (Kovaleva Table 1, Figs. 5, 8, 9).
Apart from the fine-tuning code, so that what only names the tasks (the charts, the report) does not
import torch and transformers."""

FINETUNE_TASKS = ("mrpc", "stsb", "sst2", "rte", "cola")
