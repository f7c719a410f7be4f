"""One module per DVC stage (prepare, tokenize, train, evaluate, ...); shared plumbing in pipelines.common."""
