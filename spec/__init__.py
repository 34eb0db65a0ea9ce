"""The contract as data: ``contract.toml`` (states, events, transitions, rules, precedence) and
the normative prose in ``CONTRACT.md``.  Shipped inside the wheel as ``toolcancel.spec``."""
