"""Assets that compare models: head matches between registered models."""
