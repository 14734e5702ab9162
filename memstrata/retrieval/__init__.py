"""Hybrid retrieval: what is indexed for a turn or an item (:mod:`.documents`,
:mod:`.indexer`), the fusion of the BM25 and vector candidate lists (:mod:`.fusion`),
the scoring presets (:mod:`.scoring`) and the :class:`~.search.Retriever` that runs a
search through the store's :class:`~memstrata.stores.base.SearchIndex` seam."""
