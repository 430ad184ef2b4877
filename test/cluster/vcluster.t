#!/usr/bin/env bash
# The simulated cluster itself (vcluster): the gateway layout of 5 nodes on 2 networks
# (--nets a,a,b,b,a+b): hostnames, addresses, who reaches whom, a private /dev/shm per node;
# the host's interfaces untouched; `down` leaves nothing; `up` cleans up after a killed run.
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$TOP/test/cluster/lib.sh"

host_links() { ip -o link | awk -F': ' '{ print $2 }' | sort | tr '\n' ' '; }
holders() { pgrep -f "^psmpi-vcluster-$VCLUSTER-" | tr '\n' ' '; }
before=$(host_links)

vc_up 5 --nets a,a,b,b,a+b
[ "$(host_links)" = "$before" ] && st=ok || st="not ok"
tap "$st" "the host's interfaces are untouched ($before)"

names=$(for k in 1 2 3 4 5; do "$VC" exec node$k hostname; done | tr '\n' ' ')
[ "$names" = "node1 node2 node3 node4 node5 " ] && st=ok || st="not ok"
tap "$st" "every node has its own hostname: $names"

addrs=$("$VC" hosts | tr '\n' ' ')
case $addrs in
*"node1: eth-a"*"10.250.1.1/24"*"node3: eth-b"*"10.250.2.3/24"*"node5: eth-a"*"10.250.1.5/24 eth-b"*"10.250.2.5/24"*) st=ok ;;
*) st="not ok" ;;
esac
tap "$st" "addresses per network: $addrs"

# FROM TO: "reach" when a TCP connect is answered (refused: nobody listens, but the node is
# there), "none" when the network cannot carry it
reach() {
    "$VC" exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1 | grep -q 'refused' &&
        echo reach || echo none
}
got=""
for pair in node1:node2 node1:node5 node3:node4 node3:node5 node5:node1 node5:node3 node1:node3 \
    node4:node2; do
    got="$got ${pair}=$(reach "${pair%:*}" "${pair#*:}")"
done
want=" node1:node2=reach node1:node5=reach node3:node4=reach node3:node5=reach node5:node1=reach node5:node3=reach node1:node3=none node4:node2=none"
[ "$got" = "$want" ] && st=ok || st="not ok"
tap "$st" "a reaches a, b reaches b, node5 both, a never b:$got"

"$VC" exec node1 sh -c 'echo x > /dev/shm/vcluster-test'
st=ok
[ ! -e /dev/shm/vcluster-test ] || st="not ok"
! "$VC" exec node2 test -e /dev/shm/vcluster-test || st="not ok"
"$VC" exec node1 test -e /dev/shm/vcluster-test || st="not ok"
rm -f /dev/shm/vcluster-test
tap "$st" "/dev/shm is private to a node (node1's file is not on node2 or the host)"

("$VC" exec node2 sleep 300 &) # not our job: its death is not reported
sleep 0.5
[ -n "$("$VC" ps node2)" ] && st=ok || st="not ok"
tap "$st" "vcluster ps lists a node's processes"

# a killed run: its state directory lost, holders and a job still running
rm -rf "/run/psmpi-vcluster/$VCLUSTER"
"$VC" up 2 >/dev/null 2>&1 && [ "$(echo "$(holders)" | wc -w)" -eq 3 ] && st=ok || st="not ok"
tap "$st" "up after a killed run removes the stale cluster (3 holders now: switch, node1, node2)"

"$VC" down
left=$(holders)
[ -z "$left" ] && [ ! -e "/run/psmpi-vcluster/$VCLUSTER" ] && [ "$(host_links)" = "$before" ] &&
    st=ok || st="not ok"
tap "$st" "down leaves no holder process${left:+ ($left)}, state directory or interface"
mpitest_done
