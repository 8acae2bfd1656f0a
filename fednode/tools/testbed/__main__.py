"""``python -m fednode.tools.testbed rxe [...] [-- COMMAND ...]``: the test beds without the fednode CLI."""

from __future__ import annotations

import argparse
import sys

from fednode.tools.testbed import rxe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fednode.tools.testbed", description=__doc__)
    sub = ap.add_subparsers(dest="testbed", required=True, metavar="BED")
    rxe.add_parser(sub)
    args = ap.parse_args(argv)
    return int(args.testbed_main(args))


if __name__ == "__main__":
    sys.exit(main())
