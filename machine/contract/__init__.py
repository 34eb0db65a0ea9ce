"""The contract room: the table and everything every other room reads it through.

For every other room (nothing here imports anything of toolcancel outside this room).  What is in
it: the loader and validator of ``spec/contract.toml`` (``loader``), the pure per-call machine
stepped through that table (``core``), the same table compiled into a graph of interned call states
for the registry's hot path (``compiled``), the canonical trace's vocabulary, writer and schema
(``trace``) and its strict reader (``trace_reader``), tool results and their canonical JSON
(``results``), the one error hierarchy (``errors``) and the one file writer and reader
(``fileio``).

May import: the standard library and this room only.
"""
