"""Assets of Pascual et al. 2021: Hidden Token Attribution facts."""
