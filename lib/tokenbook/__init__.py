"""tokenbook: the shared library of *Token by Token*, an executable reproducibility book.

Pipeline shape shared by every chapter::

    world or real data -> models -> scores -> measures -> statistics -> figures -> claims

Modules: ``scoring`` (per-token log-probabilities, one engine for all chapters), ``uid``,
``grounding``, ``memorisation``, ``rl``, ``worlds`` (tiny worlds with known answers),
``models`` (tiny models of the real architectures), ``data`` (real loaders), ``stats``,
``plotting``, ``claims``, ``cache``, ``runner``/``cli``.
"""

__version__ = "0.1.0"
