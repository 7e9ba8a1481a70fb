"""Assets that compare models and methods: head matches between registered models, the weightings' faithfulness
to the gradients."""
