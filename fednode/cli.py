"""``fednode``: the real agent's command line (serve, local, fs, status, bench).

The agent is the subject of its own issue; until it lands this command says
so instead of pretending to work."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print(
        "fednode: the real node agent is not built yet (see the fednode issue); "
        "use `fedsim` for the simulator.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
