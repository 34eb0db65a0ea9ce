"""One module per ``toolcancel`` command (see :mod:`toolcancel.cli.main`)."""
