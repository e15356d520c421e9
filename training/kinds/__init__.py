"""Dataset kinds other than a table, one folder each, imported only for a version of that kind
(``training.run.train`` chooses): ``images`` (its input pipeline, CNN and run)."""
