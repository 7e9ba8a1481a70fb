"""Assets of Clark et al. 2019: gradient importance, coreference baselines, probes, head MDS."""
