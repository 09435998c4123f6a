#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, everything in one directory:
#
#   scripts/slurm/cluster.sh start DIR   # munged, slurmctld, slurmd; waits until the node is idle
#   scripts/slurm/cluster.sh stop DIR    # scontrol shutdown, then waits for (and if need be
#                                        # kills) exactly the processes start recorded
#
# After start, `export SLURM_CONF=DIR/slurm.conf` points sbatch, squeue and scontrol at
# it. Authentication is munge with a key of its own in DIR (never auth/none: the daemons
# listen on every interface). Ports are chosen free at start. Needs root (SlurmUser=root)
# and scripts/slurm/install.sh's packages.
set -euo pipefail
action=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Waits up to $2 seconds for process $1 to end.
wait_gone() {
    local pid=$1 limit=$2 i
    for ((i = 0; i < limit * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

start() {
    local host cpus
    host=$(hostname -s)
    cpus=$(nproc)
    mkdir -p "$dir"/{munge,state,spool,log,run}
    chmod 0755 "$dir/munge"
    if [ ! -f "$dir/munge/munge.key" ]; then
        mungekey -c -k "$dir/munge/munge.key"
        chmod 0400 "$dir/munge/munge.key"
    fi
    munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munge.seed"
    cat > "$dir/slurm.conf" <<CONF
ClusterName=placer-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MailProg=/bin/true
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    mkdir -p "$dir/spool/$host"
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF" -c
    slurmd -f "$SLURM_CONF"
    local i
    for ((i = 0; i < 300; i++)); do
        if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
            echo "slurm: node $host idle (SLURM_CONF=$SLURM_CONF)" >&2
            return 0
        fi
        sleep 0.1
    done
    echo "slurm: the node did not become idle within 30 s; logs in $dir/log" >&2
    return 1
}

stop() {
    export SLURM_CONF=$dir/slurm.conf
    local ctld="" slurmd="" munged="" scriptd=""
    [ -f "$dir/run/slurmctld.pid" ] && ctld=$(cat "$dir/run/slurmctld.pid")
    [ -f "$dir/run/slurmd.pid" ] && slurmd=$(cat "$dir/run/slurmd.pid")
    [ -f "$dir/run/munged.pid" ] && munged=$(cat "$dir/run/munged.pid")
    # slurmctld's helper, which can outlive it by a second or two.
    if [ -n "$ctld" ]; then scriptd=$(pgrep -P "$ctld" slurmscriptd || true); fi
    [ -f "$SLURM_CONF" ] && scontrol shutdown >/dev/null 2>&1 || true
    local pid
    for pid in $slurmd $ctld $scriptd; do
        if ! wait_gone "$pid" 10; then
            echo "slurm: process $pid still running after shutdown; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    if [ -n "$munged" ]; then
        kill -TERM "$munged" 2>/dev/null || true
        wait_gone "$munged" 10 || kill -KILL "$munged" 2>/dev/null || true
    fi
    echo "slurm: stopped (slurmctld ${ctld:-none}, slurmd ${slurmd:-none}, munged ${munged:-none})" >&2
}

case $action in
    start) start ;;
    stop) stop ;;
    *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
