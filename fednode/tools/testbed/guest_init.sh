#!/bin/sh
# PID 1 of the Soft-RoCE test bed guest: packed as /init into every run's overlay by fednode/tools/testbed/rxe.py.
#
# Why a shell script and no systemd/udev: the guest is one initramfs that exists to run one command
# against a real verbs provider. This sets up just enough (mounts, kernel modules, netdevs, rxe
# devices), runs the command, reports its exit status on the serial console and powers off.
# The host reads only the marker lines carrying this run's nonce (FEDFS_GUEST_READY, FEDFS_GUEST_EXIT,
# FEDFS_OUT_BEGIN/END); everything else is for the human reading the console.
# No `set -e`: PID 1 must never exit (the kernel panics, and the host then sees no exit marker).

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm /tmp /run /out /root
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

# Written by the host for this run: FEDFS_NONCE, FEDFS_EPOCH, FEDFS_WANT_OUT, FEDFS_MODULES, FEDFS_NETDEVS.
. /testbed/config.sh

up_s() { cut -d' ' -f1 /proc/uptime; }
echo  # ends SeaBIOS's "Booting from ROM.." line
echo "testbed: guest userspace up at $(up_s) s"

# QEMU's RTC normally gives the right time already; the host's clock is the fallback for a guest stuck in 1970.
if [ "$(date +%s)" -lt "$((FEDFS_EPOCH - 300))" ]; then
  date -s "@$FEDFS_EPOCH" >/dev/null && echo "testbed: clock set from the host: $(date -u)"
fi
hostname fedfs-testbed 2>/dev/null
ip link set lo up

for m in $FEDFS_MODULES; do
  modprobe "$m" || echo "testbed: WARNING: modprobe $m failed"
done

# dummy0 carries a loopback-only device (rxe0); the veth pair models two hosts, one rxe device on each end.
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy  # the module may have made it already
ip link add veth0 type veth peer name veth1
for d in $FEDFS_NETDEVS; do ip link set "$d" up; done
rdma link add rxe0 type rxe netdev dummy0 || echo "testbed: WARNING: rdma link add rxe0 failed"
rdma link add rxe_v0 type rxe netdev veth0 || echo "testbed: WARNING: rdma link add rxe_v0 failed"
rdma link add rxe_v1 type rxe netdev veth1 || echo "testbed: WARNING: rdma link add rxe_v1 failed"

# A freshly added rxe port can stay DOWN (a QP then fails to reach RTR with errno 101) until its
# netdev goes down and up once; so flap, then wait (bounded) until every port says ACTIVE.
flap() { for d in $FEDFS_NETDEVS; do ip link set "$d" down; ip link set "$d" up; done; }
all_active() {
  n=0
  for s in /sys/class/infiniband/*/ports/1/state; do
    [ -r "$s" ] || return 1
    case "$(cat "$s")" in *ACTIVE*) n=$((n + 1)) ;; *) return 1 ;; esac
  done
  [ "$n" -ge 3 ]
}
flap
i=0
until all_active; do
  i=$((i + 1))
  if [ "$i" -ge 150 ]; then echo "testbed: WARNING: not every RDMA port became ACTIVE within 30 s"; break; fi
  [ "$i" = 50 ] && flap
  sleep 0.2
done
for s in /sys/class/infiniband/*/ports/1/state; do
  dev=${s#/sys/class/infiniband/}; echo "testbed: port ${dev%%/*}/1: $(cat "$s")"
done
ibv_devices
# The default RoCE v2 link-local GID of each device is enough to connect QPs (no IP addresses needed).
for dev in /sys/class/infiniband/*; do
  for t in $(grep -s -l 'RoCE v2' "$dev"/ports/1/gid_attrs/types/*); do
    idx=${t##*/}
    echo "testbed: roce-v2 gid ${dev##*/} index $idx $(cat "$dev/ports/1/gids/$idx")"
  done
done
echo "testbed: $(nproc) cpus, $(grep MemTotal /proc/meminfo | tr -s ' ')"

echo "FEDFS_GUEST_READY nonce=$FEDFS_NONCE uptime=$(up_s)"
cd /fedfs || echo "testbed: WARNING: no /fedfs"
PYTHONPATH=/fedfs HOME=/root PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 FEDFS_TESTBED=1 \
  sh /testbed/command.sh </dev/null
rc=$?
cd /
echo "FEDFS_GUEST_EXIT=$rc nonce=$FEDFS_NONCE uptime=$(up_s)"

if [ "$FEDFS_WANT_OUT" = 1 ]; then
  # Kernel messages must not interleave with the archive lines: keep the console to emergencies from here.
  dmesg -n 1 2>/dev/null
  if tar -C /out -czf /tmp/fedfs-out.tgz . ; then
    sum=$(sha256sum /tmp/fedfs-out.tgz | cut -d' ' -f1)
    echo "FEDFS_OUT_BEGIN nonce=$FEDFS_NONCE sha256=$sum"
    base64 -w 120 /tmp/fedfs-out.tgz
    echo "FEDFS_OUT_END nonce=$FEDFS_NONCE"
  else
    echo "testbed: WARNING: could not archive /out"
  fi
fi

sync
echo o >/proc/sysrq-trigger
sleep 10
poweroff -f
