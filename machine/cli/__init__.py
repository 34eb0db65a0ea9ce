"""The command-line room: the ``toolcancel`` command.

For users at a shell.  What is in it: argument parsing, progress and exit codes (``main``) and
one module per command (``commands``).  ``python -m toolcancel`` runs ``main`` through the
package's own ``__main__``.

May import: every other room.  Nothing imports it.
"""
