"""Asset tags that say what an asset is for, so jobs and sensors select by meaning, not by
names or groups: ANALYSIS names the analysis (jobs.ANALYSES) whose run targets the asset,
CORPUS the corpus a per-corpus asset reads or writes."""

ANALYSIS = "analysis"
CORPUS = "corpus"


def analysis_tag(name: str) -> dict[str, str]:
    return {ANALYSIS: name}


def corpus_tags(corpus: str, analysis: str | None = None) -> dict[str, str]:
    return {CORPUS: corpus, **(analysis_tag(analysis) if analysis else {})}
