"""Rows to Example-ready columns: the key-hash split, features and train statistics.

Modules: ``split`` (the salted key hash shared by every kind), ``tabular`` (typing, derived
features, fills, statistics) and ``images`` (split and statistics of image rows).
"""
