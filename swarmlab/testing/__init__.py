"""Test oracles: slow, exact references, used only by tests and benchmarks for parity. Never by product code.

Each module writes an algorithm down independently of the fast code it checks (the authors' layouts, the public
blocks, the reference tokenizer, the dense attention patterns), so that a test can compare the two with ``allclose``
and a benchmark can time the fast path against it:

* ``reference_swarm``: the authors' SWARM layer (zalandoresearch/SWARM), the oracle of ``models.swarm``;
* ``reference_swarmformer``: the authors' SwarmFormer module layout, the oracle of ``models.swarmformer``;
* ``reference_set_transformer``: the public Set Transformer blocks (juho-lee/set_transformer);
* ``reference_bert_tokenizer``: a pure-Python bert-base-uncased tokenizer, the oracle of ``tasks.tokenization``;
* ``reference_attention_patterns``: dense (L, L) masked oracles of ``models.layers.attention_patterns``;
* ``reference_window_attention``: dense (L, L) oracles of ``models.layers.window_attention``'s banded and
  shifted-window kernels, and its modules' forward through them;
* ``reference_metrics``: the adjusted Rand index by counting pairs, the oracle of ``tasks.set_losses.ari_from_tables``.

Like the rest of ``swarmlab`` these import nothing from ``models``, ``tasks`` or ``pipelines``: an oracle that
shared code with what it checks would share its bugs.
"""
