#!/bin/bash
# Interleaved: login-storm/12 (dram,tierd) main (4e34140) vs change (curve through the measured point), 3 rounds.
cd /var/tmp/s52
for i in 1 2 3; do
  for b in main change; do
    echo "$(date +%T) ls12 $b round $i"
    /var/tmp/s52/$b/tierd-bench run "login-storm/12 tenants" --modes dram,tierd --reps 1 --fresh --out /var/tmp/s52/ls12-$b-$i --logs /var/tmp/s52/ls12-$b-$i/logs > ls12-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
echo "$(date +%T) done"
