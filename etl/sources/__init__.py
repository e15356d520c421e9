"""Raw data in: landing upstream files into the raw zone, and reading a run's window of them.

Modules: ``land`` (tabular upstream files, day-partitioned), ``read`` (one raw file to string
columns), ``extract`` (the window's files, joins, staged Parquet) and ``images`` (listing and
landing image files).
"""
