"""The oracle room: what an implementer in any language runs against their registry.

For implementers.  What is in it: the one judge (``judge``: each rule's observable meaning,
once), the trace checker (``checker``), the scenario language and the vectors' file format
(``scenario``, ``vectors``, ``turnvectors``, ``turncheck``), ``conform`` with its capabilities,
declared deviations and the reaper of the processes it starts.

May import: the contract and runtime rooms.  Judging needs no registry: only ``conform --self``
runs ours, through self-verification's adapter in a process of its own.
"""
