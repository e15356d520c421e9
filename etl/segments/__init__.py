"""Segments: the unit of work -- how a version's records are made, once, and shared by every
later version.

A segment is one build over a contiguous run of raw partitions, bounded by raw bytes. A kind's
window build (``tabular``, ``images``) starts the run (suite, lookups, digests read once),
plans the window purely from one listing and the previous manifest (``plan``), builds each
missing segment as six coarse calls into the stage packages under its lease (``build``,
``claim``), merges small neighbours a level up (``compact``), judges the window from stored
partials (``judge``) and lists it in a version's manifest (``compose``). ``request`` holds
what a kind's build is asked and answers, ``files`` a segment's one side file. Where segments
live and how they are named and deleted is ``etl.versions.segment`` (readers need it without
any of this).
"""
