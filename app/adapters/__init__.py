"""Per-family mflux adapters that put a ``TeaCacheGate`` between a transformer's body and tail.

``install_gate(pipeline, gate)`` picks the adapter for the pipeline's family; the returned
installation is a context manager whose exit restores the pipeline exactly.
"""
