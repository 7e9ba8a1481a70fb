-- Pascual et al. Fig. 7 / Appendix C: every head's attention, previous-layer and input
-- contribution maps of one example per Kovaleva pattern class (int_hta_example_maps).
CREATE OR REPLACE VIEW pascual_hta_example_maps AS
SELECT * FROM int_hta_example_maps;
