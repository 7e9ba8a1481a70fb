"""Clark et al. 2019, "What Does BERT Look At?": gradient importance (Fig. 3), coreference
baselines (Table 2), attention probes (Table 3) and head clustering (Fig. 6). The facts these
results share with the other papers come from the attention pass in compute/."""
