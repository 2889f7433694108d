#!/bin/sh
# A shell workload that counts only its middle phase, as perf stat --control
# expects (bfperf passes the descriptors: fd:3,4 below):
#
#   mkfifo ctl ack; exec 3<>ctl 4<>ack
#   bfperf stat -M ddr,llc -D -1 --control fd:3,4 -- sh examples/control/phase.sh
ctl() { echo "$1" >&3 && read -r _ <&4; }
sleep 1           # setting up: not counted
ctl enable
sleep 1           # the phase that matters
ctl disable
sleep 1           # tearing down: not counted
