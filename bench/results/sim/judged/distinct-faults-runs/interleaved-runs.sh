#!/bin/bash
# Interleaved: login-storm/12 (dram,tierd) base (949d4cd) vs change (resting cut priced once + distinct faults), 3 rounds.
cd /var/tmp/s54
for i in 1 2 3; do
  for b in base change; do
    echo "$(date +%T) ls12 $b round $i"
    /var/tmp/s54/$b/tierd-bench run "login-storm/12 tenants" --modes dram,tierd --reps 1 --fresh --out /var/tmp/s54/ls12-$b-$i --logs /var/tmp/s54/ls12-$b-$i/logs > ls12-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
echo "$(date +%T) done"
