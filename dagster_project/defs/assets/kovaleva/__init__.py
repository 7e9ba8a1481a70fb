"""Assets of Kovaleva et al. 2019: fine-tuned checkpoints, task scores, ablations, similarity."""
