"""One module per DVC stage (prepare, tokenize, train, evaluate, ...); each a thin main() over the swarmlab library."""
