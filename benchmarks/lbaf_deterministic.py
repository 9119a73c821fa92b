"""Run LBAF from its source with its ranks, tasks and shared blocks hashed by id, so that its set iterations (and the
seeded draws made from them) follow the ids instead of memory addresses: repeated runs then print the same figures
(docs/design/informandtransfer.md §5). A diagnostic harness for comparing hermes with LBAF; no LBAF code is copied::

    LBAF=/path/to/LB-analysis-framework python -m benchmarks.lbaf_deterministic -c config/<file>.yaml

(run in LBAF's own environment: Python 3.11 with its requirements).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    root = os.environ.get("LBAF")
    if not root:
        print("lbaf_deterministic: set LBAF to a checkout of LB-analysis-framework", file=sys.stderr)
        return 2
    src = os.path.join(os.path.abspath(root), "src")
    if not os.path.isdir(os.path.join(src, "lbaf")):
        print(f"lbaf_deterministic: no LBAF source under {src!r} (LBAF must name a checkout)", file=sys.stderr)
        return 2
    sys.path.insert(0, src)
    from lbaf.Applications.LBAF_app import LBAFApplication
    from lbaf.Model.lbsBlock import Block
    from lbaf.Model.lbsObject import Object
    from lbaf.Model.lbsRank import Rank

    for cls in (Rank, Object, Block):
        cls.__hash__ = lambda self: hash(self.get_id())
    return int(LBAFApplication().run() or 0)


if __name__ == "__main__":
    sys.exit(main())
