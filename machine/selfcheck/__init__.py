"""The self-verification room: what we run on our own registry and our own contract.

For the project's own engineers and CI.  What is in it: the bounded model checker behind
``toolcancel verify`` -- the space it explores (``space``), running and judging it
(``verifier``) --, the deliberately broken registries it and the tests must
kill (``mutants``), mutation testing of the contract itself (``specmutants``), the Dask cluster
engine both run their jobs on (``cluster``), our registry behind the adapter protocol, which
``conform --self`` judges (``adapter``), the scenario harness and the turn runner that play
the oracle's languages on our registry (``harness``, ``turncheck``), the modelled deviations'
models (``models``), and the generation of the vectors.

May import: the contract, runtime and oracle rooms.
"""
