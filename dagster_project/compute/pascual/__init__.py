"""Pascual et al. 2021, "Telling BERT's Full Story: from Local Attention to Global Aggregation":
Hidden Token Attribution, exact and estimated, and the facts drawn from it."""
