"""The oracle room: what an implementer in any language runs against their registry.

For implementers.  What is in it: the one judge (``judge``: each rule's observable meaning,
once), the trace checker (``checker``), the scenario language and the vectors' file format
(``scenario``, ``vectors``, ``turnvectors``, ``turncheck``), ``conform`` with its capabilities,
declared deviations and the reaper of the processes it starts.

May import: the contract and runtime rooms.  The judge and the trace checker never import the
registry (.importlinter says so); the scenario harness, the vectors and ``turncheck`` still drive
ours, until they move to self-verification.
"""
