# Repro of the SIGSEGV row in reliability.md (run as root from the repo root after cargo build --release --workspace; paths below are this machine's; set --policy none to see it without tierd's moves).
set -u
D=/var/tmp/relayprobe; rm -rf $D; mkdir -p $D
T=/work/main/target/release
C="$T/tierctl --socket $D/sock"
$T/tierd --dram-budget 128M --ratio 2 --policy tierd --interval 1s --state-dir $D/state --socket $D/sock --cgroup-name relayprobe > $D/log 2>&1 &
TP=$!
sleep 2
$C run --name w --size 192M -- $T/tierd-bench workload --size 192M --hot 64M --phase active:6s,idle:600s --json
sleep 10
$C run --name v --size 128M -- $T/tierd-bench workload --size 128M --hot 128M --phase active:600s
sleep 15
$C stop v --signal KILL
sleep 20
grep -c "laid out" $D/log
$C status | tail -3
$C stop w
sleep 15
grep summary $D/state/tenants/w/stdout
kill $TP; wait $TP
grep -E "laid out|relayout" $D/log | head -5
