-- Kovaleva et al. §4.2, Fig. 3: per head, the mean over FrameNet sentences of the largest
-- attention on a lexical unit -> core frame element link, and whether it is above the 99th
-- percentile of the head means (the paper's reading) and beyond its interval; the rules and
-- every column: int_framenet_heads.
CREATE OR REPLACE VIEW kovaleva_framenet_heads AS
SELECT *
FROM int_framenet_heads;
