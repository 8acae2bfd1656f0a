#!/usr/bin/env bash
# The project's two commands on a fresh Debian machine (run as root or with sudo):
#   ./dev.sh demo    -- set up, then run the main job (simulate a federation, write a figure)
#   ./dev.sh test    -- set up, then run every test (what CI runs)
# Set-up is idempotent: system packages via apt-get, Python packages into .venv.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv

need_apt=()
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# the Soft-RoCE test bed (fednode testbed rxe): QEMU and what builds its guest
for tool in qemu-system-x86_64:qemu-system-x86 debootstrap:debootstrap cpio:cpio zstd:zstd depmod:kmod xz:xz-utils; do
  command -v "${tool%%:*}" >/dev/null || need_apt+=("${tool#*:}")
done
# PostMark 1.5x, the benchmark the Federated DAFS paper measures with (tests/test_postmark.py runs it)
command -v postmark >/dev/null || need_apt+=(postmark)
# `fednode mount` (FUSE 3: fusermount3 and libfuse3) and the other benchmarks run on it (fednode.tools.mount_bench)
# extended attributes on a mount (tests/test_mount.py): getfattr/setfattr, rsync -X, stress-ng's xattr stressor
for tool in fusermount3:fuse3 fio:fio dbench:dbench fs_mark:fsmark getfattr:attr rsync:rsync stress-ng:stress-ng; do
  command -v "${tool%%:*}" >/dev/null || need_apt+=("${tool#*:}")
done
# GlusterFS, the gluster4 baseline of fednode.tools.mount_bench (a 4-brick volume on this machine, what a peer
# would install instead): glusterd and the gluster CLI, and the client behind `mount -t glusterfs`; both live in
# sbin, which a non-root PATH may lack
PATH="$PATH:/usr/sbin:/sbin" command -v glusterd >/dev/null || need_apt+=(glusterfs-server)
PATH="$PATH:/usr/sbin:/sbin" command -v mount.glusterfs >/dev/null || need_apt+=(glusterfs-client)
if ((${#need_apt[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "fedfs needs Python 3.11 or newer; found $(python3 --version)" >&2; exit 1; }

stamp="$VENV/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[test]"
  touch "$stamp"
fi

cmd=${1:-help}; shift || true
case "$cmd" in
  demo) exec "$VENV/bin/fedsim" demo "$@" ;;
  # two phases: everything else on 2 workers, then the tests that measure this machine, alone
  # (work stealing: the Soft-RoCE guest's tests, half an hour under TCG, are collected first and run
  # at the head of one worker's share while the other takes the rest: tests/conftest.py)
  # (pytest's status 5, "no tests collected", is a phase with nothing to run among the tests asked for)
  test) "$VENV/bin/python" -m pytest -q -n 2 --dist worksteal -m "not serial" "$@" || [ $? -eq 5 ]
        "$VENV/bin/python" -m pytest -q -m serial "$@" || [ $? -eq 5 ] ;;
  setup) ;;
  *) echo "usage: ./dev.sh demo|test|setup" >&2; exit 2 ;;
esac
