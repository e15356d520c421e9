"""Scripts that run inside a peer's own environment (``bench/.peers/<name>``), never the project's.

They import only the standard library and the peer's packages; ``bench.peers_run`` installs
the environments, runs these scripts as children and measures them from outside.
"""
