"""Raw data in: landing upstream files into the raw zone, and reading a run's window of them.

Modules: ``land`` (tabular upstream files, day-partitioned), ``read`` (one raw file to string
columns), ``extract`` (the window's raw partitions from one listing; ``read_window``: a
segment's rows, lookups joined, misfiled rows set apart), ``lookups`` (the spec's joins) and
``images`` (listing and landing image files).
"""
