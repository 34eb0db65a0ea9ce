"""The teaching room: the contract shown to people.

For teachers, reviewers and anyone learning the contract.  What is in it: the diagrams drawn
from the table (``diagrams``), the precedence and stage tables in Markdown (``tables``),
step-by-step explanations of a call (``explain``), the offline explorer site (``explorer``),
the contract as a ``transitions`` statechart (``statechart``) and the table of what real tool
runtimes keep (``realworld``).

May import: every room below it (contract, runtime, oracle, self-verification).
"""
