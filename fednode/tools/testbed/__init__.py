"""Test beds: environments the project's tests need and this machine lacks, built from Debian packages.

``rxe``: a QEMU guest with Soft-RoCE (``rdma_rxe``) devices, so the RDMA transport runs against a real
verbs provider on machines with no RDMA hardware (see :mod:`fednode.tools.testbed.rxe`).

To wire it into a command line (``fednode testbed rxe ...``)::

    from fednode.tools import testbed
    testbed.add_parser(subparsers)          # adds "testbed" with its subcommands
    ...
    if args.cmd == "testbed":
        return testbed.main(args)
"""

from __future__ import annotations

import argparse
from typing import Any

from fednode.tools.testbed import rxe


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``testbed`` (with its subcommands, each setting ``testbed_main``) to argparse subparsers."""
    p = subparsers.add_parser("testbed", help="run commands in test beds (rxe: a guest with Soft-RoCE devices)")
    sub = p.add_subparsers(dest="testbed", required=True, metavar="BED")
    rxe.add_parser(sub)
    return p


def main(args: argparse.Namespace) -> int:
    """Run the test bed subcommand that ``args`` was parsed for."""
    return int(args.testbed_main(args))
