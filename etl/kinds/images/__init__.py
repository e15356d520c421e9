"""The images kind: a folder of PNG/JPEG files (labelled by class folder or an index) checked
file by file and written as one segment.

``spec`` (``kind: images`` specs), ``source`` (the files listed with their labels; the
digits landed), ``check`` (every file decoded, checked and converted) and ``window`` (the
kind's ``KIND``: the window's one segment built, split, written and judged).
"""
