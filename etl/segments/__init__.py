"""Segments: the unit of work -- how a version's records are made, once, and shared by every
later version -- as every dataset kind shares it.

A segment is one build over a contiguous run of raw partitions, bounded by raw bytes. The
window is planned purely from one listing and the previous manifest (``plan``); each missing
segment is built by its kind (``etl.kinds``) under the segment's lease, its side files and
``segment.json`` recorded last, and small neighbours merged a level up (``build``); the
window is judged from stored partials and listed in a version's manifest (``compose``).
Where segments live and how they are named and deleted is ``etl.versions.segment`` (readers
need it without any of this). Nothing here imports a kind's package.
"""
