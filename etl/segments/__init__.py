"""Segments: how a version's records are made, once, and shared by every later version.

A segment is one build over a contiguous run of raw partitions, bounded by raw bytes
(``plan``), built by one Dask task under its lease (``build``, ``claim``), merged with its
small neighbours a level up (``compact``), judged as a window from stored partials
(``judge``) and listed in a version's manifest (``compose``). Each dataset kind has its
builder here (``tabular``, ``images``); ``window`` holds what they take and return, and
``files`` a segment's one side file. Where segments live and how they are named and deleted
is ``etl.versions.segment`` (readers need it without any of this).
"""
